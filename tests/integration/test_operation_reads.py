"""The reads behind the Operations tab and the jump to an operation: pages that neither
overlap nor skip in the order of the last change, state and word filters, ids found by their
beginning, the dispatches an operation turned away, and an event page read with its head."""

from __future__ import annotations

import pytest

from flowledger.domain import FailOutcome
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain
from flowledger.storage.reads import event_log as events
from flowledger.storage.reads import operation_pages as operation_rows
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads.operation_pages import After, OperationFilter
from tests.support.builders import FakeClock, req


def _operations(ledger: Ledger, clock: FakeClock, n: int) -> list[str]:
    """``n`` operations, changed one a minute: every third confirmed, then every fifth held
    after an unknown outcome (still dispatching), every seventh failed (rejected), the rest
    left dispatching."""
    ids = []
    for i in range(n):
        op = f"op:{i:03d}"
        ledger.dispatch(op, req(f"exec-{i}", input={"i": i})).run("wf")
        if i % 3 == 0:
            ledger.confirm(op, f"R-{i}", execution_id=f"exec-{i}").run("wf")
        elif i % 5 == 0:
            ledger.fail(op, FailOutcome.UNKNOWN, "timeout").run("wf")
        elif i % 7 == 0:
            ledger.fail(op, FailOutcome.REJECTED, "400").run("wf")
        ids.append(op)
        clock.advance(minutes=1)
    return ids


def _all_pages(store: Store, flt: OperationFilter, size: int) -> list[str]:
    seen: list[str] = []
    after = None
    while True:
        page = operations.list_operations(store, flt=flt, after=after, limit=size)
        seen += [r["operation_id"] for r in page]
        if len(page) < size:
            return seen
        after = After(page[-1]["updated_at"], page[-1]["operation_id"])


def test_pages_cover_every_operation_once_most_recently_changed_first(
    ledger: Ledger, clock: FakeClock
) -> None:
    ids = _operations(ledger, clock, 23)
    assert _all_pages(ledger.store, OperationFilter(), 4) == ids[::-1]
    assert operations.count_operations(ledger.store) == 23


def test_state_and_word_filters(ledger: Ledger, clock: FakeClock) -> None:
    ids = _operations(ledger, clock, 16)
    confirmed = [op for i, op in enumerate(ids) if i % 3 == 0][::-1]
    assert _all_pages(ledger.store, OperationFilter.parse("state:confirmed"), 2) == confirmed
    assert _all_pages(ledger.store, OperationFilter.parse("CONFIRMED"), 100) == confirmed
    both = OperationFilter.parse("confirmed dispatching")
    assert set(_all_pages(ledger.store, both, 3)) == set(ids) - {"op:007", "op:014"}
    assert operations.count_operations(ledger.store, flt=both) == 14
    assert _all_pages(ledger.store, OperationFilter.parse("R-12"), 100) == ["op:012"]
    assert _all_pages(ledger.store, OperationFilter.parse("exec-1 failed"), 100) == ["op:014"]
    assert _all_pages(ledger.store, OperationFilter.parse("op:00_"), 100) == []  # literal _
    assert operations.count_operations(ledger.store, flt=OperationFilter.parse("x")) is None
    rows = operations.list_operations(ledger.store, flt=OperationFilter.parse("dispatching"))
    held = [(r["operation_id"], r["open_holds"]) for r in rows if r["open_holds"]]
    assert held == [("op:010", 1), ("op:005", 1)]


@pytest.mark.parametrize("window", [1, 2, 3, 100])
@pytest.mark.parametrize("text", ["exec-1", "R-", "state:dispatching exec-2", "no-such-word"])
def test_a_windowed_word_search_finds_what_the_pages_find(
    ledger: Ledger, clock: FakeClock, window: int, text: str
) -> None:
    _operations(ledger, clock, 24)
    flt = OperationFilter.parse(text)
    found: list[str] = []
    after = None
    for _ in range(100):
        page = operations.search_operations(
            ledger.store, flt=flt, after=after, limit=2, window=window
        )
        found += [r["operation_id"] for r in page.rows]
        last = page.resume or (page.rows[-1] if len(page.rows) == 2 else None)
        if last is None:
            break
        after = After(last["updated_at"], last["operation_id"])
    assert found == _all_pages(ledger.store, flt, 100)


def test_a_word_search_stops_at_the_end_of_its_window(ledger: Ledger, clock: FakeClock) -> None:
    _operations(ledger, clock, 12)
    nothing = OperationFilter.parse("no-such-word")
    page = operations.search_operations(ledger.store, flt=nothing, limit=10, window=2)
    # Of each state, the 2 most recently changed were read; the window ends at the newest
    # of those second rows, so that every state is read down to it.
    assert page.rows == [] and page.resume is not None and page.read > 0
    dispatching = OperationFilter.parse("dispatching")
    states = operations.search_operations(ledger.store, flt=dispatching, limit=10, window=2)
    assert states.resume is None  # a state alone is an index range: no window
    assert [r["operation_id"] for r in states.rows] == _all_pages(ledger.store, dispatching, 10)
    assert len(states.rows) > 2


def test_an_operation_is_found_by_its_id_or_its_beginning(ledger: Ledger, clock: FakeClock) -> None:
    _operations(ledger, clock, 12)
    assert operations.find_operation_ids(ledger.store, "op:010") == ["op:010"]
    assert operations.find_operation_ids(ledger.store, " op:01") == ["op:010", "op:011"]
    assert operations.find_operation_ids(ledger.store, "op:0", limit=3) == [
        "op:000",
        "op:001",
        "op:002",
    ]
    assert operations.find_operation_ids(ledger.store, "nothing") == []
    assert operations.find_operation_ids(ledger.store, "  ") == []


def test_a_dispatch_turned_away_names_the_asking_and_the_writing_execution(
    ledger: Ledger,
) -> None:
    ledger.dispatch("op:busy", req("exec-1", input={"a": 1})).run("wf")
    answer = ledger.dispatch("op:busy", req("exec-2", input={"a": 1})).run("wf")
    assert answer.decision == "hold" and not answer.hold_ids  # no hold of its own
    [held] = operations.turned_away(ledger.store, "op:busy")
    assert held["data"]["execution_id"] == "exec-2"
    assert held["data"]["reason"] == "in_flight"
    assert held["data"]["in_flight"] == "exec-1"
    assert operations.turned_away(ledger.store, "op:other") == []


def test_an_event_page_never_runs_ahead_of_its_head(ledger: Ledger, clock: FakeClock) -> None:
    _operations(ledger, clock, 3)
    page = events.event_page(ledger.store, limit=2)
    assert (page.head_seq, page.head_hash) == chain.chain_head(ledger.store)
    assert [e["seq"] for e in page.rows] == [page.head_seq, page.head_seq - 1]
    assert page.rows[0]["hash"] == page.head_hash


def test_a_page_of_operations_reads_the_state_and_change_index(sqlite_url: str) -> None:
    from datetime import UTC, datetime

    from flowledger.storage.migrate import init_ledger

    store: Store
    store, _ = init_ledger(sqlite_url)
    after = After(datetime(2026, 11, 2, tzinfo=UTC), "op:1")
    try:
        for flt in (OperationFilter(), OperationFilter.parse("state:failed")):
            key = (after.updated_at, after.operation_id)
            stmt = operation_rows.page_statement(
                flt.states or operations.STATES, flt.words, key, 100
            )
            with store.reader.connect() as conn:
                sql = str(stmt.compile(conn, compile_kwargs={"literal_binds": True}))
                plan = [str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
            searches = [p for p in plan if p.startswith(("SEARCH operations", "SCAN operations"))]
            assert searches and all("ix_operations_state_updated" in p for p in searches[:-1])
            assert not any(p.startswith("SCAN operations") for p in plan)
    finally:
        store.dispose()
