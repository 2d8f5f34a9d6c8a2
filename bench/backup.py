"""``flowledger backup`` of a large SQLite ledger while the receiver takes writes: how long it
takes, what it does to the writers' latency, and ``verify --deep`` on the copy.

``python -m bench.backup [--events N] [--ledger PATH] [--clients C] [--baseline S]``: a ledger
of N events (default 1,000,000) written through the services in group-commit batches (built
once at PATH and kept: building it takes minutes; a fresh copy of it is written to each run),
``flowledger serve`` on it, C clients sending dispatch+confirm pairs without pause; S seconds
of that alone (the baseline), then ``flowledger backup`` as a process of its own while they go
on, then S seconds alone again. Prints the backup's time, and the copy's (when the snapshot is
held), the writers' rate, p50, p99 and longest answer alone before, during the copy, during
the checks (``quick_check`` and ``verify`` of the copy: CPU and disk, no lock) and alone after,
and then ``flowledger verify --deep`` on the copy (its time and what it says). The ledger's own
WAL checkpoint runs every 1,000 commits of the writer (on SQLite builds with the WAL-reset
bug), so one may fall inside the copy. First, on the ledger alone, the two ways to copy one
snapshot: the backup API in one step and ``VACUUM INTO``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.load import until
from bench.receivers import BENCH_SECRET, receivers
from bench.verify import build, request
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import CHECKPOINT_EVERY, WAL_RESET_AFFECTED, sqlite_files
from flowledger.storage.migrate import init_ledger

EVENTS_PER_OPERATION = 2.1  # bench.verify's mix: dispatch and confirm, every tenth held


def ledger_of(path: Path, events: int) -> Path:
    """The ledger at ``path``, built with about ``events`` events when it is not there."""
    if not path.exists():
        started = time.perf_counter()
        store, _ = init_ledger(str(path))
        made = build(store, int(events / EVENTS_PER_OPERATION))
        store.dispose()
        print(f"built {path}: {made:,} events in {time.perf_counter() - started:.0f} s")
    return path


def figures(label: str, timings: list[tuple[float, float]], start: float, end: float) -> None:
    """The requests answered between ``start`` and ``end``: count, rate, p50, p99, longest."""
    inside = [latency for at, latency in timings if start <= at <= end]
    q = statistics.quantiles(inside, n=100)
    print(
        f"  {label}: {len(inside):,} requests in {end - start:.1f} s "
        f"({len(inside) / (end - start):,.0f}/s), p50 {q[49] * 1000:.1f} ms, "
        f"p99 {q[98] * 1000:.1f} ms, longest {max(inside) * 1000:.0f} ms"
    )


def copy_ways(ledger: Path, into: Path) -> None:
    """The two ways to read one snapshot of a SQLite database into a new file, on the quiet
    ledger: the backup API in one step (what ``backup`` does: pages as they are) and
    ``VACUUM INTO`` (the database rebuilt, table by table and index by index)."""
    for name, copy in (("backup API, one step", _one_step), ("VACUUM INTO", _vacuum_into)):
        target = into / f"{name.split()[0]}.db"
        started = time.perf_counter()
        copy(ledger, target)
        seconds = time.perf_counter() - started
        print(
            f"  {name}: {seconds:.1f} s, {target.stat().st_size / 2**20:,.0f} MiB "
            "(no load, no fsync, no checks)"
        )
        target.unlink()


def _one_step(ledger: Path, target: Path) -> None:
    with sqlite3.connect(ledger) as source, sqlite3.connect(target) as copy:
        source.backup(copy, pages=-1)


def _vacuum_into(ledger: Path, target: Path) -> None:
    with sqlite3.connect(ledger) as source:
        source.execute("VACUUM INTO ?", (str(target),))


def flowledger(*args: str) -> tuple[float, str]:
    """A ``flowledger`` command as a process: its time and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flowledger.cli", *args], capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"flowledger {args[0]} failed: {done.stdout}{done.stderr}")
    return seconds, done.stdout


def commits_beside_a_reader(directory: Path, commits: int) -> None:
    """What a backup's long read does to the writer at its WAL checkpoints, alone: ``commits``
    through the unit of work (one dispatch each) while a reader holds a snapshot from before
    them all, past the commits that checkpoint (every ``CHECKPOINT_EVERY``)."""
    db = directory / "beside-a-reader.db"
    store, _ = init_ledger(str(db))
    ledger = Ledger(store)
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()  # its snapshot, as a backup's
    took: list[float] = []
    try:
        for n in range(commits):
            started = time.perf_counter()
            ledger.dispatch(f"op:{n}", request(f"op:{n}")).run("token:bench")
            took.append(time.perf_counter() - started)
    finally:
        reader.execute("COMMIT")
        reader.close()
        store.dispose()
    p50, p99 = (statistics.quantiles(took, n=100)[i] * 1000 for i in (49, 98))
    print(
        f"  {commits:,} commits beside a reader on an older snapshot (a checkpoint every "
        f"{CHECKPOINT_EVERY:,}): p50 {p50:.1f} ms, p99 {p99:.1f} ms, longest "
        f"{max(took) * 1000:,.0f} ms; checkpoints left short {ledger.unit.checkpoints_short}"
    )


def backed_up(copy: Path, db: Path) -> tuple[float, str]:
    """``flowledger backup`` as a process: when its copy started (the moment its partial
    file appeared, polled), and what it printed."""
    backup = subprocess.Popen(
        [sys.executable, "-m", "flowledger.cli", "backup", str(copy), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    partial = copy.with_name(f".{copy.name}.partial")
    while not partial.exists() and backup.poll() is None:
        time.sleep(0.01)
    copy_start = time.monotonic()
    said, _ = backup.communicate()
    if backup.returncode != 0:
        raise SystemExit(f"flowledger backup failed: {said}")
    return copy_start, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ledger", type=Path, default=Path("./var/bench-backup.db"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument(
        "--baseline", type=float, default=30.0, help="seconds of load alone, before and after"
    )
    parser.add_argument(
        "--reader-only", action="store_true", help="only the commits beside a reader"
    )
    parser.add_argument(
        "--commits", type=int, default=2 * CHECKPOINT_EVERY, help="commits beside a reader"
    )
    args = parser.parse_args()
    if WAL_RESET_AFFECTED:
        with tempfile.TemporaryDirectory() as tmp:
            commits_beside_a_reader(Path(tmp), args.commits)
    if args.reader_only:
        return
    template = ledger_of(args.ledger, args.events)
    print(f"copying {template} ({template.stat().st_size / 2**20:,.0f} MiB) two ways:")
    copy_ways(template, template.parent)
    with tempfile.TemporaryDirectory(dir=template.parent, prefix="bench-backup-") as tmp:
        db = Path(tmp) / "ledger.db"
        shutil.copyfile(template, db)  # the built ledger is whole in its file (closed clean)
        store, _ = init_ledger(str(db))
        made = create_token(
            Ledger(store), "bench", "write", signing=False, server_secret=BENCH_SECRET.encode()
        )
        store.dispose()
        copy = Path(tmp) / "copy.db"
        stop = threading.Event()
        with receivers(str(db), 1) as (port,):
            timings: list[tuple[float, float]] = []
            load = threading.Thread(
                target=lambda: timings.extend(
                    asyncio.run(until(port, (made.token, None), args.clients, "bench", stop))
                )
            )
            load.start()
            try:
                time.sleep(2)  # warm-up: not counted
                before = (time.monotonic(), time.monotonic() + args.baseline)
                time.sleep(args.baseline)
                backup_start = time.monotonic()
                copy_start, said = backed_up(copy, db)
                backup_end = time.monotonic()
                time.sleep(args.baseline)
                after = (backup_end, time.monotonic())
            finally:
                stop.set()
                load.join()
        wal = Path(f"{db}-wal")
        copied = float(said.split("copied ")[1].split(" in ")[1].split(" s")[0])
        print(
            f"backup of {db.stat().st_size / 2**20:,.0f} MiB "
            f"(WAL {wal.stat().st_size / 2**20 if wal.exists() else 0:,.0f} MiB after) while "
            f"{args.clients} clients wrote: {backup_end - backup_start:.1f} s as a process, "
            f"of which the copy (one snapshot held) {copied:.1f} s"
        )
        print("  " + said.strip().replace("\n", "\n  "))
        figures("writers alone, before", timings, *before)
        figures("during the copy", timings, copy_start, copy_start + copied)
        figures("during the checks", timings, copy_start + copied, backup_end)
        figures("writers alone, after", timings, *after)
        deep, said = flowledger("verify", "--deep", "--db", str(copy))
        print(f"verify --deep on the copy: {deep:.0f} s")
        print("  " + said.strip().replace("\n", "\n  "))
        for path in sqlite_files(copy)[1:]:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
