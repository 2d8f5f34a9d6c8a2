"""py-spy samples of a receiver and its writer process during a timed run, and the top of each
profile."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench.receivers import descendants


@contextlib.contextmanager
def sampled(pid: int, output: Path | None) -> Iterator[None]:
    """py-spy samples process ``pid`` (to ``output``) and its writer process (to
    ``writer-output`` beside it) while the block runs (nothing when ``output`` is None), then
    the top of each profile is printed. One py-spy a process: with ``--subprocesses`` it did
    not sample the writer process, which was started before it."""
    if output is None:
        yield
        return
    exe = shutil.which("py-spy", path=Path(sys.executable).parent) or "py-spy"
    targets = [(pid, output)] + [
        (child, output.with_name(f"writer-{output.name}")) for child in descendants(pid)
    ]
    spies = []
    for target, path in targets:
        command = [exe, "record", "--pid", str(target), "--gil", "--rate", "200"]
        command += ["--format", "raw", "--output", str(path), "--nonblocking"]
        spy = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        spies.append((spy, path))
    try:
        yield
    finally:
        errors = []
        for spy, _ in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on an interrupt
            errors.append(spy.communicate(timeout=60)[1])
    for (_, path), err in zip(spies, errors, strict=True):
        if not path.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.strip()}")
        print_profile(path)


def print_profile(path: Path, top: int = 15) -> None:
    """The functions with most samples in a collapsed-stack file, by their own samples and by
    the samples of the stacks they are in."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.split(" (", 1)[0] + _where(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    print(f"  profile of the receiver: {total} samples holding the interpreter lock ({path})")
    for title, counts in (("own time", own), ("with callees", inclusive)):
        print(f"  top by {title}:")
        for frame, n in counts.most_common(top):
            print(f"    {100 * n / total:5.1f}%  {frame}")


def _where(frame: str) -> str:
    """`` (file)`` of a py-spy frame ``name (path:line)``, the path cut to its last parts."""
    _, _, place = frame.partition(" (")
    path = place.rstrip(")").rsplit(":", 1)[0]
    return f" ({'/'.join(path.split('/')[-2:])})" if path else ""
