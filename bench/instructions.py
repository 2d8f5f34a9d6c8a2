"""The writer process's instructions per transition, counted by Valgrind's callgrind.

    python -m bench.instructions [--batches 20] [--size 28]

CPU time per transition moves by several percent from one run to the next on a shared
machine, so a step worth 2 % is lost in it. The instructions a program runs do not move so:
this runs the writer's batches (as ``bench.writer``: dispatches, then the same operations'
confirms, each batch in one transaction, :func:`run_batch`) under callgrind twice, both runs
building the calls of 5 + ``--batches`` batches of each kind, one running 5 of them and the
other all, and prints the difference per transition: the start, the imports, the ledger's
creation and the making of the calls cancel out, and what is left is :func:`run_batch`'s.
What the kernel does (the commit's writes and ``fsync``) is not counted, and callgrind's
instructions are not time: a cache miss or a system call costs more than its count.

To compare two trees: ``python -m bench.turns REV --runs 1 --bench instructions``, for a REV
that has this benchmark (for an older one, run this file in a worktree of it).

Needs ``valgrind`` (Debian's package of that name); about two minutes a tree.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.writer import calls, run_pairs
from flowledger.receiver.engine.tuning import quiet_collector
from flowledger.receiver.engine.writer_child import run_batch
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger

_COLLECTED = re.compile(r"Collected : (\d+)")
_FIRST = 5  # batches of each kind in the shorter run


def workload(directory: Path, batches: int, built: int, size: int) -> None:
    """The first ``batches`` of ``built`` batches of ``size`` dispatches and as many of their
    confirms, after a warm-up of 10 of each, on a fresh ledger in ``directory``."""
    store, _ = init_ledger(str(directory / "ledger.db"))
    ledger = Ledger(store)
    try:
        for k in range(10):
            for batch in calls("warm", k * size, size):
                run_batch(ledger, batch)
        work = [calls("run", k * size, size) for k in range(built)]
        quiet_collector()  # as the writer process before its first batch
        run_pairs(ledger, work[:batches])
    finally:
        store.dispose()


def counted(batches: int, built: int, size: int, directory: Path) -> int:
    """Instructions callgrind counted for a whole run of :func:`workload` in a child."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--child",
        str(batches),
        "--built",
        str(built),
        "--size",
        str(size),
        "--dir",
        str(directory),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # the same dict layouts in every run
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the run under callgrind failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions",
        description=(
            "The writer process's instructions a transition (its run_batch: dispatches, then "
            "their confirms), counted by Valgrind's callgrind in two runs of about a minute "
            "each; needs valgrind. Prints one line: the instructions a transition."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--batches", type=_positive, default=20, help="batches of each kind counted"
    )
    parser.add_argument("--size", type=_positive, default=28, help="calls a batch (a commit)")
    parser.add_argument("--dir", default="./var", help="where the ledgers are made")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # run the workload alone
    parser.add_argument("--built", type=int, help=argparse.SUPPRESS)  # the calls made for it
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    if args.child is not None:
        with tempfile.TemporaryDirectory(dir=base, prefix="bench-instructions-") as tmp:
            workload(Path(tmp), args.child, args.built, args.size)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions needs valgrind (apt-get install valgrind)")
    built = _FIRST + args.batches
    short = counted(_FIRST, built, args.size, base)
    long = counted(built, built, args.size, base)
    transitions = 2 * args.size * args.batches
    print(
        f"writer: {(long - short) / transitions:,.0f} instructions per transition "
        f"({args.size} calls a commit, callgrind)"
    )


if __name__ == "__main__":
    main()
