"""How fast the terminal UI paints its queue, applies a filter, opens the Operations tab and
jumps to an operation on a large ledger.

A temporary SQLite ledger (created by ``init``) gets 1,000,000 operations, 10,000 open holds
and 40,000 resolved ones by raw bulk inserts. Then, headless at 120x40: the time from start
(importing the UI included) to the first painted queue; from typing a filter to the filtered
queue on screen; from pressing ``5`` to the Operations tab's first page; from a state filter
to the filtered operations; from ``g``, an id and ``enter`` to that operation's screen. The
baseline, measured in the same run, is what the UI avoids: loading every open hold at once.

    python -m bench.tui [--operations N] [--open-holds N] [--resolved-holds N]
    python -m bench.tui --large     # 1M / 10k open holds and 10M / 100k, side by side

``--large`` builds both ledgers (the 10M one takes minutes and a few GB in the temporary
directory) and measures each in a fresh process, so both first paints import the UI cold.

Goals: first paint <= 1.0 s; any filter or jump <= 100 ms; the Operations tab's first page
<= 100 ms. Figures move with whatever else the machine is doing; run it on a quiet one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowledger.storage.engine import open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import hold_queue as holds

NOW = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)
STATES = ["confirmed"] * 17 + ["prepared", "failed", "cancelled"]
REASONS = ["unknown_outcome", "execution_failed", "input_mismatch", "stale_prepared"]
FILTERS = ["carol", "reason:execution_failed", "overdue blocking", "wf-7 owner:bob"]
OPERATION_FILTERS = ["state:failed", "cancelled"]
GOALS = {"paint": 1.0, "filter": 0.1, "operations": 0.1, "jump": 0.1}


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
    conn.execute("PRAGMA cache_size = -262144")  # 256 MB: index pages spill less often
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


async def measure_ui(db: str, jump_to: str) -> dict[str, Any]:
    started = time.perf_counter()
    from textual.widgets import Input

    from flowledger.services.ledger import Ledger
    from flowledger.tui import make_app
    from flowledger.tui.panes.operations import OperationsPane
    from flowledger.tui.panes.queue import QueuePane
    from flowledger.tui.screens.operation import OperationScreen

    store = open_store(db)
    app = make_app(Ledger(store), operator="bench", clock=lambda: NOW, refresh_seconds=None)
    figures: dict[str, Any] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.screen.query_one(QueuePane)
        await _until(pilot, lambda: pane.table.row_count > 0)
        figures["paint"] = time.perf_counter() - started
        await app.workers.wait_for_complete()  # the other tabs load too
        await pilot.pause()
        figures["filters"] = [(text, *(await _filters(pilot, pane, text))) for text in FILTERS]

        # What the keys run, called directly: the test harness's own key press waits for
        # the whole app to be idle and would add its own hundreds of milliseconds.
        main = app.screen
        ops = main.query_one(OperationsPane)
        ops.rows, ops.shown = [], -1  # as if never loaded: time the tab's own first page
        ops.table.clear()  # (and its table empty, as before its first page)
        t0 = time.perf_counter()
        main.action_tab("operations")  # type: ignore[attr-defined]
        ops.reload(keep_cursor=False)
        await _until(pilot, lambda: ops.shown == ops.generation and ops.table.row_count > 0)
        figures["operations_tab"] = time.perf_counter() - t0
        await _until(pilot, lambda: ops.total is not None)
        figures["operation_filters"] = [
            (text, *(await _filters(pilot, ops, text))) for text in OPERATION_FILTERS
        ]

        runs = []
        for _ in range(3):
            await pilot.press("g")
            app.screen.query_one(Input).value = jump_to  # as typed (each key looks up too)
            await pilot.pause()
            t0 = time.perf_counter()
            app.screen._open()  # type: ignore[attr-defined]  # what enter runs
            await _until(
                pilot,
                lambda: isinstance(app.screen, OperationScreen) and app.screen.detail is not None,
            )
            runs.append(time.perf_counter() - t0)
            await pilot.press("escape")
            await pilot.pause()
        figures["jump"] = statistics.median(runs)
    store.dispose()
    return figures


async def _filters(pilot: Any, pane: Any, text: str) -> tuple[float, int, float]:
    """The median of 3 typings of ``text`` into an idle pane's filter, the rows it lets
    through (the total, or what is loaded when a filter cannot be counted cheaply), and the
    median time until a windowed search has stopped (its page full or the rows ended)."""
    runs = []
    for _ in range(3):
        runs.append(await _filter(pilot, pane, text))
        await _filter(pilot, pane, "")
        await pilot.pause()
    await _filter(pilot, pane, text)
    rows = pane.total if pane.total is not None else len(pane.rows)
    return statistics.median(r[0] for r in runs), rows, statistics.median(r[1] for r in runs)


async def _filter(pilot: Any, pane: Any, text: str) -> tuple[float, float]:
    """Type ``text`` into the pane's filter; seconds until the filtered rows are painted, and
    until the search behind them has stopped (a queue search goes on a window at a time)."""
    before = pane.generation
    counts = _counts(pane)
    counted = len(counts)
    t0 = time.perf_counter()
    pane.query_one("Input").value = text
    await _until(pilot, lambda: pane.shown > before)
    painted = time.perf_counter() - t0
    await _until(pilot, lambda: getattr(pane, "resume", None) is None)
    searched = time.perf_counter() - t0
    # Then its count, if it has one: a filter that cannot be counted cheaply (words, or a
    # queue filter over more open holds than a count reads) is counted as None, no total.
    await _until(pilot, lambda: pane.total is not None or len(counts) > counted)
    return painted, searched


def _counts(pane: Any) -> list[int | None]:
    """The counts the pane has made, in order (its ``count`` wrapped once to record them)."""
    if not hasattr(pane, "bench_counts"):
        made: list[int | None] = []
        count = pane.count

        def recorded() -> int | None:
            total = count()
            made.append(total)
            return total

        pane.count, pane.bench_counts = recorded, made
    return pane.bench_counts


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


def measure(operations: int, open_holds: int, resolved: int) -> dict[str, Any]:
    """Build a ledger of that size and measure the UI and the queries on it."""
    from flowledger.storage.reads import operation_pages as operation_reads

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        load = build(path, operations, open_holds, resolved)
        jump_to = f"bench:op:{operations // 2:07d}"
        figures = asyncio.run(measure_ui(str(path), jump_to))
        store = open_store(str(path))
        figures["page"] = timed(lambda: holds.hold_queue(store, NOW, limit=100))
        figures["everything"] = timed(lambda: holds.list_open_holds(store, limit=open_holds + 1))
        figures["operations_page"] = timed(
            lambda: operation_reads.list_operations(store, limit=100)
        )
        figures["find"] = timed(lambda: operation_reads.find_operation_ids(store, jump_to))
        store.dispose()
    figures.update(operations=operations, open_holds=open_holds, resolved=resolved, load=load)
    return figures


def report(runs: list[dict[str, Any]], file: Any = None) -> None:
    """One column per ledger size, so the growth shows."""

    def row(label: str, values: list[str], goal: str = "") -> None:
        line = f"{label:<50}" + "".join(f"{v:>14}" for v in values) + f"  {goal}"
        print(line, file=file)

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.1f} ms"

    row("operations", [f"{r['operations']:,}" for r in runs])
    row("open holds / resolved", [f"{r['open_holds']:,}/{r['resolved']:,}" for r in runs])
    row("bulk insert", [f"{r['load']:.1f} s" for r in runs])
    row("first painted queue (start, imports included)", [ms(r["paint"]) for r in runs], "≤ 1000")
    for i, (text, *_rest) in enumerate(runs[0]["filters"]):
        row(f"queue filter {text!r}", [ms(r["filters"][i][1]) for r in runs], "≤ 100")
        row("  … until its search stopped", [ms(r["filters"][i][3]) for r in runs])
    row("operations tab, first page painted", [ms(r["operations_tab"]) for r in runs], "≤ 100")
    for i, (text, *_rest) in enumerate(runs[0]["operation_filters"]):
        row(
            f"operations filter {text!r}",
            [ms(r["operation_filters"][i][1]) for r in runs],
            "≤ 100",
        )
    row("jump: enter on an id to its screen (median of 3)", [ms(r["jump"]) for r in runs], "≤ 100")
    row("query: first page of 100 holds", [ms(r["page"]) for r in runs])
    row("query: first page of 100 operations", [ms(r["operations_page"]) for r in runs])
    row("query: find an operation id", [ms(r["find"]) for r in runs])
    row("baseline: every open hold at once", [ms(r["everything"]) for r in runs])
    row("ratio baseline / paged hold query", [f"{r['everything'] / r['page']:.1f}x" for r in runs])
    worst = [
        max(
            [r["paint"] / GOALS["paint"], r["operations_tab"] / GOALS["operations"]]
            + [f[1] / GOALS["filter"] for f in r["filters"] + r["operation_filters"]]
            + [r["jump"] / GOALS["jump"]]
        )
        for r in runs
    ]
    row("worst ratio to its goal (≤ 1.00 meets all)", [f"{w:.2f}" for w in worst])
    (file or sys.stdout).flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=1_000_000)
    parser.add_argument("--open-holds", type=int, default=10_000)
    parser.add_argument("--resolved-holds", type=int, default=40_000)
    parser.add_argument(
        "--large",
        action="store_true",
        help="1M operations / 10k open holds and 10M / 100k, side by side (takes minutes)",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one size
    args = parser.parse_args(argv)
    if args.json:
        figures = measure(args.operations, args.open_holds, args.resolved_holds)
        print(json.dumps(figures))
        return
    sizes = (
        [(1_000_000, 10_000, 40_000), (10_000_000, 100_000, 400_000)]
        if args.large
        else [(args.operations, args.open_holds, args.resolved_holds)]
    )
    runs = []
    for operations, open_holds, resolved in sizes:
        print(f"building and measuring {operations:,} operations…", file=sys.stderr, flush=True)
        # A fresh process per size: each first paint imports the UI cold.
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.tui",
                "--json",
                f"--operations={operations}",
                f"--open-holds={open_holds}",
                f"--resolved-holds={resolved}",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
        if len(sizes) > 1:  # each size as it is done; all together below
            report(runs[-1:], file=sys.stderr)
    report(runs)


if __name__ == "__main__":
    main()
