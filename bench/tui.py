"""How fast the terminal UI paints its queue and applies a filter on a large ledger.

A temporary SQLite ledger (created by ``init``) gets 1,000,000 operations, 10,000 open holds
and 40,000 resolved ones by raw bulk inserts. Then, headless at 120x40: the time from start
(importing the UI included) to the first painted queue, and the time from typing a filter to
the filtered queue on screen. The baseline, measured in the same run, is what the UI avoids:
loading every open hold at once.

    python -m bench.tui [--operations N] [--open-holds N]

Goals: first paint <= 1.5 s, filter <= 200 ms. Figures move with whatever else the machine
is doing; run it on a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger.reads import duty, queries
from ledger.storage.engine import open_store
from ledger.storage.migrate import init_ledger

NOW = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)
STATES = ["confirmed"] * 17 + ["prepared", "failed", "cancelled"]
REASONS = ["unknown_outcome", "execution_failed", "input_mismatch", "stale_prepared"]
FILTERS = ["carol", "reason:execution_failed", "overdue blocking", "wf-7 owner:bob"]


def _ts(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _operations(n: int, held: int) -> Iterator[tuple[Any, ...]]:
    for i in range(n):
        state = "dispatching" if i < held else STATES[i % len(STATES)]
        at = _ts(NOW - timedelta(seconds=n - i))
        yield (
            f"bench:op:{i:07d}",
            state,
            f"sha256:{i:064x}",
            "v1",
            1,
            5,
            f"exec-{i}",
            f"wf-{i % 50}",
            "send",
            "prod-n8n",
            f"R-{i}" if state == "confirmed" else None,
            2,
            at,
            at,
        )


def _holds(open_n: int, resolved_n: int) -> Iterator[tuple[Any, ...]]:
    owners = [None, None, "alice", "bob", "carol"]
    for i in range(open_n + resolved_n):
        is_open = i < open_n
        opened = NOW - timedelta(minutes=(i * 7) % 600)
        reason = REASONS[i % len(REASONS)]
        yield (
            f"bench:{reason}:{i}",
            reason,
            reason in ("unknown_outcome", "execution_failed"),
            f"bench:op:{i % open_n:07d}",
            f"exec-{i % open_n}",
            "timeout after 30 s",
            _ts(opened),
            _ts(opened + timedelta(hours=1)),
            owners[i % len(owners)],
            None if is_open else _ts(opened + timedelta(minutes=20)),
            None if is_open else "operator:alice",
            None if is_open else "cancelled",
            1,
        )


def build(path: Path, operations: int, open_holds: int, resolved: int) -> float:
    store, _ = init_ledger(str(path))
    store.dispose()
    started = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # a throwaway file: load it fast
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO operations (operation_id, state, input_hash, processing_version, attempt, "
        "max_attempts, execution_id, workflow_id, step, source, receipt, version, created_at, "
        "updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        _operations(operations, open_holds),
    )
    conn.executemany(
        "INSERT INTO holds (cause_key, reason, blocking, operation_id, execution_id, detail, "
        "opened_at, deadline, owner, resolved_at, resolved_by, resolution, version) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        _holds(open_holds, resolved),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.close()
    return time.perf_counter() - started


async def first_paint_and_filters(db: str) -> tuple[float, list[tuple[str, float, int]]]:
    started = time.perf_counter()
    from ledger.writer.services import Ledger
    from tui import make_app
    from tui.panes import QueuePane

    store = open_store(db)
    app = make_app(Ledger(store), operator="bench", clock=lambda: NOW, refresh_seconds=None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.screen.query_one(QueuePane)
        await _until(pilot, lambda: pane.table.row_count > 0)
        paint = time.perf_counter() - started
        await app.workers.wait_for_complete()  # the other tabs load too
        await pilot.pause()
        results = []
        for text in FILTERS:
            runs = []
            for _ in range(3):
                runs.append(await _filter(pilot, pane, text))
                await _filter(pilot, pane, "")
                await pilot.pause()
            await _filter(pilot, pane, text)
            results.append((text, statistics.median(runs), pane.total or 0))
    store.dispose()
    return paint, results


async def _filter(pilot: Any, pane: Any, text: str) -> float:
    """Type ``text`` into the queue's filter; seconds until the filtered rows are painted."""
    before = pane.generation
    t0 = time.perf_counter()
    pane.query_one("Input").value = text
    await _until(pilot, lambda: pane.shown > before)
    seconds = time.perf_counter() - t0
    await _until(pilot, lambda: pane.total is not None)
    return seconds


async def _until(pilot: Any, done: Callable[[], bool]) -> None:
    """Wait until ``done``, then one frame (60 per second) for the rows to be painted. (The
    test harness's own ``pilot.pause()`` waits for idle and would add its own ~200 ms.)"""
    while not done():
        await asyncio.sleep(0.001)
    await asyncio.sleep(1 / 60)


def timed(fn: Callable[[], Any], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=1_000_000)
    parser.add_argument("--open-holds", type=int, default=10_000)
    parser.add_argument("--resolved-holds", type=int, default=40_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        load = build(path, args.operations, args.open_holds, args.resolved_holds)
        print(
            f"ledger: {args.operations:,} operations, {args.open_holds:,} open holds, "
            f"{args.resolved_holds:,} resolved (bulk insert {load:.1f} s)"
        )
        paint, filters = asyncio.run(first_paint_and_filters(str(path)))
        store = open_store(str(path))
        page = timed(lambda: duty.hold_queue(store, NOW, limit=100))
        everything = timed(lambda: queries.list_open_holds(store, limit=args.open_holds + 1))
        store.dispose()
    print(f"first painted queue (start, imports included): {paint * 1000:7.0f} ms  (goal 1500)")
    print("filter: median of 3, typed into an idle queue")
    for text, seconds, total in filters:
        print(f"filter {text!r:<28} {seconds * 1000:7.1f} ms  {total:>6,} rows  (goal 200)")
    worst = max(s for _, s, _ in filters)
    print(f"query, first page of 100 holds:        {page * 1000:7.1f} ms")
    print(f"baseline, every open hold at once:      {everything * 1000:7.1f} ms")
    print(f"ratio baseline / paged query:           {everything / page:7.1f}x")
    print(f"ratio first paint / goal:               {paint / 1.5:7.2f}")
    print(f"ratio worst filter / goal:              {worst / 0.2:7.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
