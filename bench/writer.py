"""The writer process's CPU per transition by batch size, and its cost per call and per commit.

Without HTTP or the frames: what a group commit costs once, and what each call in it costs.

    python -m bench.writer [--sizes 4,8,16,32,64,128] [--batches 60] [--dir ./var]

For each size B, a fresh SQLite ledger and batches of B dispatches, then of the same B
operations' confirms, each batch run as the writer process runs it
(:func:`flowledger.receiver.engine.writer_child.run_batch`, one transaction and one durable
commit), the collector set as the writer sets it (:func:`quiet_collector`). Prints the CPU
per transition at each size (``time.process_time``: user and system, the commit's ``fsync``
included), the time spent in the commit alone, and the least-squares fit ``per call + per
commit / B``: the receiver's batches in ``bench.ingest`` (``group commit … units per
commit``) say which B applies there.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.load import pair
from flowledger.receiver.api.calls import BY_NAME, CallRequest
from flowledger.receiver.engine.tuning import quiet_collector
from flowledger.receiver.engine.writer_child import run_batch
from flowledger.services.ledger import Ledger
from flowledger.storage import tx as transactions
from flowledger.storage.migrate import init_ledger

TTL = 86400.0  # an Idempotency-Key's life, unused: the calls carry none


def calls(run: str, first: int, size: int) -> tuple[list[Any], list[Any]]:
    """Batch ``first``..``first + size`` of run ``run``: its dispatches and its confirms, as the
    write lane hands them over (validated bodies, the bench token's actor)."""
    dispatches, confirms = [], []
    for i in range(first, first + size):
        dispatch, confirm = pair(i)
        op = f"{run}-{i}"
        bodies = [BY_NAME[name].body.model_validate_json(b) for name, b in (
            ("dispatch", dispatch), ("confirm", confirm))]  # fmt: skip
        dispatches.append((i, CallRequest("dispatch", op, bodies[0], "token:bench", 1,
                                       None, "", TTL, None, True)))  # fmt: skip
        confirms.append((i, CallRequest("confirm", op, bodies[1], "token:bench", 1,
                                     None, "", TTL, None, False)))  # fmt: skip
    return dispatches, confirms


def run_pairs(ledger: Ledger, work: list[tuple[list[Any], list[Any]]]) -> None:
    """Each batch of dispatches, then the same operations' confirms, each run as the writer
    process runs a batch (:func:`run_batch`); every call must be answered 200."""
    for dispatches, confirms in work:
        for batch in (dispatches, confirms):
            replies, units = run_batch(ledger, batch)
            assert units == len(batch) and all(r.status == 200 for _, r in replies)


class _CommitClock:
    """The CPU spent in ``Tx.commit`` while installed (the commit and its ``fsync``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._commit = transactions.Tx.commit

    def __enter__(self) -> _CommitClock:
        original, clock = self._commit, self

        def commit(tx: transactions.Tx) -> None:
            started = time.process_time()
            try:
                original(tx)
            finally:
                clock.seconds += time.process_time() - started

        transactions.Tx.commit = commit  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_: object) -> None:
        transactions.Tx.commit = self._commit  # type: ignore[method-assign]


def measure(directory: Path, size: int, batches: int) -> tuple[float, float]:
    """CPU per transition at batch size ``size``, and the commit's share of it, in µs."""
    with tempfile.TemporaryDirectory(dir=directory, prefix="bench-writer-") as tmp:
        store, _ = init_ledger(str(Path(tmp) / "ledger.db"))
        ledger = Ledger(store)
        try:
            for batch in calls("warm", 0, size):
                run_batch(ledger, batch)
            work = [calls("run", k * size, size) for k in range(batches)]
            threshold = gc.get_threshold()
            quiet_collector()  # as the writer process before its first batch
            try:
                with _CommitClock() as commits:
                    started = time.process_time()
                    run_pairs(ledger, work)
                    spent = time.process_time() - started
            finally:
                gc.unfreeze()
                gc.set_threshold(*threshold)
        finally:
            store.dispose()
    transitions = 2 * size * batches
    return spent / transitions * 1e6, commits.seconds / transitions * 1e6


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """``a + b / size`` through the points (least squares): the cost per call and per commit."""
    xs = [1 / size for size, _ in points]
    ys = [cost for _, cost in points]
    per_commit, per_call = statistics.linear_regression(xs, ys)
    return per_call, per_commit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,16,32,64,128", help="batch sizes, comma-separated")
    parser.add_argument("--batches", type=int, default=60, help="batches of each kind per size")
    parser.add_argument("--dir", default="./var", help="where the ledgers are made")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    points = []
    for size in (int(s) for s in args.sizes.split(",")):
        cost, commit = measure(base, size, args.batches)
        points.append((size, cost))
        print(f"  {size:4d} calls a commit: {cost:6.1f} us a transition (the commit {commit:.1f})")
    if len({size for size, _ in points}) > 1:  # one size alone has no fit
        per_call, per_commit = fit(points)
        print(f"writer, fitted: {per_call:.1f} us a call + {per_commit:.0f} us a commit")


if __name__ == "__main__":
    main()
