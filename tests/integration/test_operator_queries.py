"""The paged, filtered reads behind the terminal UI: pages that neither overlap nor skip,
filters that mean what they say, and plans that use the indexes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowledger.domain import FailOutcome
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain
from flowledger.storage.reads import event_log as events
from flowledger.storage.reads import execution_copies as executions
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads.hold_queue import HOLDS
from tests.support.builders import FakeClock, req


def _holds(ledger: Ledger, clock: FakeClock, n: int) -> list[int]:
    ids = []
    for i in range(n):
        op = f"op:{i:03d}"
        ledger.dispatch(op, req(f"exec-{i}", input={"i": i})).run("wf")
        ids.append(ledger.fail(op, FailOutcome.UNKNOWN, "t").run("wf").hold_ids[0])
        clock.advance(minutes=1)
    return ids


def test_pages_cover_the_queue_once_in_deadline_order(ledger: Ledger, clock: FakeClock) -> None:
    ids = _holds(ledger, clock, 25)
    seen = []
    for offset in range(0, 30, 10):
        seen += [
            r["id"] for r in holds.hold_queue(ledger.store, clock.now, limit=10, offset=offset)
        ]
    assert seen == ids
    assert holds.count_hold_queue(ledger.store, clock.now) == 25


@pytest.mark.parametrize("sort", sorted(holds.QUEUE_SORTS))
@pytest.mark.parametrize("descending", [False, True])
def test_paging_after_the_last_row_reads_what_offsets_read(
    ledger: Ledger, clock: FakeClock, sort: str, descending: bool
) -> None:
    ids = _holds(ledger, clock, 9)
    for i in ids[::3]:  # equal deadlines and owners, so the id orders the ties
        ledger.update_hold(i, operator="x", note="n", owner="bob").run()

    def pages(by_key: bool) -> list[int]:
        rows: list[dict[str, object]] = []
        for _ in range(len(ids)):
            last = rows[-1] if rows else None
            page = holds.hold_queue(
                ledger.store,
                clock.now,
                sort=sort,
                descending=descending,
                limit=2,
                # Where the sort pages by key the offset is not read: give 0 to be sure.
                offset=0 if by_key and sort in holds.KEYSET_SORTS else len(rows),
                after=last if by_key else None,
            )
            rows += page
            if len(page) < 2:
                break
        return [int(r["id"]) for r in rows]  # type: ignore[call-overload]

    assert pages(by_key=True) == pages(by_key=False)
    assert sorted(pages(by_key=True)) == sorted(ids)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("window", [1, 2, 5, 100])
def test_a_windowed_search_finds_what_one_query_finds(
    ledger: Ledger, clock: FakeClock, descending: bool, window: int
) -> None:
    ids = _holds(ledger, clock, 12)
    later = clock.now + timedelta(hours=3)
    for i in ids[::4]:  # equal deadlines: the id orders the ties, across windows too
        ledger.update_hold(i, operator="x", note="n", deadline=later).run()
    for i in ids[1::3]:
        ledger.update_hold(i, operator="x", note="n", owner="bob").run()
    flt = holds.HoldFilter.parse("owner:bob")
    expected = holds.hold_queue(ledger.store, clock.now, flt=flt, descending=descending)
    found: list[int] = []
    after = None
    for _ in range(len(ids) + 1):
        page = holds.search_hold_queue(
            ledger.store,
            clock.now,
            flt=flt,
            descending=descending,
            limit=2,
            after=after,
            window=window,
        )
        found += [r["id"] for r in page.rows]
        if page.resume is None and len(page.rows) < 2:
            break
        after = page.resume if page.resume is not None else page.rows[-1]
    assert found == [r["id"] for r in expected] and len(found) == 4


def test_a_search_that_finds_nothing_reads_one_window_and_says_where_it_stopped(
    ledger: Ledger, clock: FakeClock
) -> None:
    ids = _holds(ledger, clock, 7)
    nothing = holds.HoldFilter.parse("no-such-word")
    page = holds.search_hold_queue(ledger.store, clock.now, flt=nothing, limit=10, window=3)
    assert (page.rows, page.resume["id"] if page.resume else None, page.read) == ([], ids[2], 3)
    rest = holds.search_hold_queue(
        ledger.store, clock.now, flt=nothing, limit=10, window=10, after=page.resume
    )
    assert (rest.rows, rest.resume) == ([], None)  # fewer than a window left: the end
    # No filter, or another sort: the plain query, which never stops short.
    whole = holds.search_hold_queue(ledger.store, clock.now, limit=10, window=3)
    assert ([r["id"] for r in whole.rows], whole.resume) == (ids, None)
    by_owner = holds.search_hold_queue(ledger.store, clock.now, flt=nothing, sort="owner", window=3)
    assert (by_owner.rows, by_owner.resume) == ([], None)


def test_filters_combine_words_fields_and_flags(ledger: Ledger, clock: FakeClock) -> None:
    ids = _holds(ledger, clock, 6)
    ledger.update_hold(ids[2], operator="x", note="n", owner="Alice", next_action="ring 100%").run()
    # The first three are past their deadlines by now, the fourth is due this very moment
    # (due counts as overdue, as in the sweep), the last two are not yet.
    now = clock.now + timedelta(minutes=57)

    def found(text: str) -> list[int]:
        flt = holds.HoldFilter.parse(text)
        rows = holds.hold_queue(ledger.store, now, flt=flt)
        assert holds.count_hold_queue(ledger.store, now, flt=flt) == len(rows)
        return [r["id"] for r in rows]

    assert found("owner:alice") == [ids[2]]
    assert found("ALICE overdue") == [ids[2]]
    assert found("overdue") == ids[:4]
    assert found("op:op:00") == ids
    assert found("100%") == [ids[2]]
    assert found("10_%") == []  # LIKE wildcards are matched literally
    assert found("state:dispatching blocking workflow:wf-1") == ids
    assert found("reason:max_attempts") == []


def test_filter_parse_keeps_unknown_fields_as_words() -> None:
    flt = holds.HoldFilter.parse("foo:bar reason:unknown overdue x")
    assert flt.words == ("foo:bar", "x")
    assert flt.fields == (("reason", "unknown"),)
    assert flt.overdue and not flt.blocking


@pytest.mark.parametrize("sort", sorted(holds.QUEUE_SORTS))
def test_every_sort_is_total(ledger: Ledger, clock: FakeClock, sort: str) -> None:
    ids = _holds(ledger, clock, 5)
    rows = holds.hold_queue(ledger.store, clock.now, sort=sort, descending=True)
    assert sorted(r["id"] for r in rows) == sorted(ids)


def test_events_and_executions_page_backwards_by_key(ledger: Ledger, clock: FakeClock) -> None:
    _holds(ledger, clock, 4)
    first = events.recent_events(ledger.store, limit=3)
    rest = events.recent_events(ledger.store, before_seq=first[-1]["seq"], limit=100)
    seqs = [e["seq"] for e in first + rest]
    assert seqs == sorted(seqs, reverse=True) and len(seqs) == len(set(seqs))
    assert [e["kind"] for e in events.recent_events(ledger.store, text="failed_unknown")] == [
        "failed_unknown"
    ] * 4


@pytest.mark.parametrize("window", [1, 2, 5, 100])
def test_an_event_search_by_window_finds_what_one_query_finds(
    ledger: Ledger, clock: FakeClock, window: int
) -> None:
    _holds(ledger, clock, 6)  # 18 events, every third a failed_unknown
    expected = [e["seq"] for e in events.recent_events(ledger.store, text="unknown")]
    found: list[int] = []
    before: int | None = None
    for _ in range(40):
        page = events.event_page(
            ledger.store, text="unknown", before_seq=before, limit=2, window=window
        )
        assert page.read <= window  # never more of the log than the window
        found += [e["seq"] for e in page.rows]
        if page.resume is None and len(page.rows) < 2:
            break
        before = (page.resume or page.rows[-1])["seq"]
    assert found == expected and len(found) == 6


def test_an_event_search_that_finds_nothing_reads_one_window(
    ledger: Ledger, clock: FakeClock
) -> None:
    _holds(ledger, clock, 3)
    head = chain.chain_head(ledger.store)[0]
    page = events.event_page(ledger.store, text="no-such-word", limit=10, window=4)
    assert (page.rows, page.resume, page.read) == ([], {"seq": head - 3}, 4)
    rest = events.event_page(
        ledger.store, text="no-such-word", before_seq=head - 3, limit=10, window=100
    )
    assert (rest.rows, rest.resume, rest.read) == ([], None, head - 4)  # the log's start
    # No words: the plain page, which never stops short.
    plain = events.event_page(ledger.store, limit=100, window=4)
    assert (len(plain.rows), plain.resume, plain.read) == (head, None, 0)


def test_a_filter_matched_row_by_row_is_counted_only_within_the_window(
    ledger: Ledger, clock: FakeClock
) -> None:
    ids = _holds(ledger, clock, 7)
    ledger.update_hold(ids[0], operator="x", note="n", owner="bob").run()
    owned = holds.HoldFilter.parse("owner:bob")
    assert holds.count_hold_queue(ledger.store, clock.now, flt=owned, window=7) == 1
    # More open holds than the window: counting would read them all, so it is not known.
    for text in ("owner:bob", "bob", "blocking", "overdue blocking"):
        flt = holds.HoldFilter.parse(text)
        assert holds.count_hold_queue(ledger.store, clock.now, flt=flt, window=6) is None, text
    # No filter, or overdue alone: a range of the open holds' index, counted at any size.
    assert holds.count_hold_queue(ledger.store, clock.now, window=1) == 7
    overdue = holds.HoldFilter.parse("overdue")
    assert holds.count_hold_queue(ledger.store, clock.now, flt=overdue, window=1) is not None


def test_queue_query_uses_the_open_deadline_index(sqlite_url: str) -> None:
    from flowledger.storage.migrate import init_ledger

    store: Store
    store, _ = init_ledger(sqlite_url)
    try:
        stmt = (
            HOLDS.select()
            .where(HOLDS.c.resolved_at.is_(None))
            .order_by(HOLDS.c.deadline, HOLDS.c.id)
            .limit(100)
        )
        with store.reader.connect() as conn:
            sql = str(stmt.compile(conn, compile_kwargs={"literal_binds": True}))
            plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}"))
        assert "ix_holds_open_deadline" in plan
    finally:
        store.dispose()


def test_pruned_executions_keep_their_copy_and_say_when(demo_like_store: Store) -> None:
    gone = executions.search_executions(demo_like_store, text="gone")
    assert gone and all(e["gone_at"] is not None for e in gone)
    page = executions.search_executions(demo_like_store, limit=5)
    after = executions.search_executions(demo_like_store, after_id=page[-1]["id"], limit=1000)
    listed = executions.list_executions(demo_like_store, limit=1000)
    assert [e["id"] for e in page + after] == [e["id"] for e in listed]  # the CLI's order
    started = [e["started_at"] or e["first_seen_at"] for e in page + after]
    assert started == sorted(started, reverse=True)
    assert executions.executions_by_ref(demo_like_store, [gone[0]["external_id"]])[0]["gone_at"]


@pytest.fixture
def demo_like_store(store: Store) -> Store:
    from datetime import UTC, datetime

    from flowledger.programs import demo

    demo.mark_demo(store)
    demo.build_demo(store, "test", now=datetime(2026, 11, 2, 17, 0, tzinfo=UTC))
    return store
