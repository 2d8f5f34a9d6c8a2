"""Two trees taking turns at one benchmark: the medians of each figure it prints, side by side.

    python -m bench.turns REV [--runs 5] [--bench ingest] [-- ARGS…]

Checks ``REV`` out in a temporary worktree, then runs ``python -m bench.BENCH ARGS`` ``--runs``
times in each tree, alternating (REV first), with the same interpreter and each tree's own
code first on ``sys.path`` (the writer process and ``flowledger serve`` follow it). A figure that
moves with the machine's load from one sitting to the next is compared within one sitting, a
few minutes apart, rather than against a figure from another day.

Every line of the benchmark's output that holds numbers is a figure: the same line, with its
numbers in the same places, in every run (the k-th such line when it repeats, as each round of
``bench.ingest`` does). Printed: each figure with the medians of REV's runs, then of this tree's,
in place of its numbers.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")  # 5,321 is one number

Figures = dict[tuple[str, int], list[float]]


def figures(output: str) -> Figures:
    """Each line with numbers, keyed by its text with the numbers taken out and by how many
    times that text came before, to the numbers it holds."""
    found: Figures = {}
    seen: defaultdict[str, int] = defaultdict(int)
    for line in output.splitlines():
        numbers = _NUMBER.findall(line)
        if not numbers:
            continue
        shape = _NUMBER.sub("#", line)
        found[(shape, seen[shape])] = [float(n.replace(",", "")) for n in numbers]
        seen[shape] += 1
    return found


def medians(runs: list[Figures]) -> Figures:
    """Each figure found in every run, with the median of each of its numbers."""
    first = runs[0]
    return {
        key: [statistics.median(run[key][i] for run in runs) for i in range(len(numbers))]
        for key, numbers in first.items()  # in the order the first run printed them
        if all(len(run.get(key, ())) == len(numbers) for run in runs)
    }


def shown(shape: str, numbers: list[float]) -> str:
    values = iter(numbers)
    return re.sub("#", lambda _: f"{next(values):,.6g}", shape)


def run(tree: Path, bench: str, args: list[str]) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{bench}", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"bench.{bench} failed in {tree}:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the tree to take turns with (a commit, tag or branch)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each tree")
    parser.add_argument("--bench", default="ingest", help="the benchmark: bench.NAME")
    parser.epilog = "After --, the benchmark's own arguments."
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_args(argv[:cut]), argv[cut + 1 :]
    with tempfile.TemporaryDirectory(prefix="bench-turns-") as tmp:
        other = Path(tmp) / "tree"
        subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "worktree",
                "add",
                "--detach",
                "--quiet",
                str(other),
                args.rev,
            ],
            check=True,
        )
        try:
            outputs: dict[str, list[Figures]] = {"rev": [], "this": []}
            for turn in range(args.runs):
                for name, tree in (("rev", other), ("this", ROOT)):
                    outputs[name].append(figures(run(tree, args.bench, extra)))
                    print(f"  turn {turn + 1}/{args.runs}: {name} done", file=sys.stderr)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)], check=False
            )
    before, after = medians(outputs["rev"]), medians(outputs["this"])
    print(f"bench.{args.bench}, {args.runs} runs of each tree taking turns, medians:")
    width = max(len(args.rev), len("this tree"))
    for key in before:
        if key in after:
            print(f"  {args.rev:>{width}}: {shown(key[0], before[key]).strip()}")
            print(f"  {'this tree':>{width}}: {shown(key[0], after[key]).strip()}")
    # A line one tree prints in another shape (or not at all): each side's own, after.
    for side, mine, theirs in ((args.rev, before, after), ("this tree", after, before)):
        for key in mine:
            if key not in theirs:
                print(f"  {side:>{width}} only: {shown(key[0], mine[key]).strip()}")


if __name__ == "__main__":
    main()
