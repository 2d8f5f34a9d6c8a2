"""Two syncs of one source at once (the scheduler's job and a `flowledger sync --once`, say):
the position moves only from where each run found it, so the run that was overtaken stops. It
neither takes the position back nor writes again the pages the other run stored."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Execution, table
from flowledger.storage.reads import records as queries
from flowledger.sync import SyncReport, sync_source
from tests.support.builders import T0, FakeClock
from tests.support.fakes.n8n import KEY, FakeN8n

ENV = "TEST_N8N_API_KEY"
EXECUTIONS = table(Execution)
SOURCE = SourceConfig(
    name="prod-n8n", kind="n8n", base_url=FakeN8n.base_url, api_key_env=ENV, page_size=2
)


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv(ENV, KEY)
    return FakeN8n()


def sync(ledger: Ledger, n8n: FakeN8n) -> SyncReport:
    return sync_source(ledger, SOURCE, n8n.client(), sleep=lambda seconds: None)


def source_row(store: Store) -> dict[str, Any]:
    (row,) = queries.list_sources(store)
    return row


def seen(store: Store) -> dict[str, tuple[datetime, datetime]]:
    """Each copy's (first_seen_at, last_seen_at): a copy written again gets a later
    last_seen_at."""
    with store.reader.connect() as conn:
        rows = conn.execute(
            sa.select(
                EXECUTIONS.c.external_id, EXECUTIONS.c.first_seen_at, EXECUTIONS.c.last_seen_at
            )
        ).all()
    return {r.external_id: (r.first_seen_at, r.last_seen_at) for r in rows}


def test_a_sync_overtaken_by_another_of_its_source_stops_without_writing_again(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(6)  # three pages of two, newest first: 6 5 | 4 3 | 2 1
    later = T0 + timedelta(minutes=1)
    second: list[SyncReport] = []
    position_it_left: list[str] = []
    running = False
    stored_first_page = threading.Event()

    def overtake(request: httpx.Request) -> httpx.Response | None:
        # Once the first sync has stored its first page, and while it asks for its second (a
        # read that starts while the first page is written), a second sync of the same
        # source starts where that page left the position, and runs to the end.
        nonlocal running
        if running or "cursor" not in request.url.params:
            return None
        running = True
        assert stored_first_page.wait(timeout=30), "the first page was never stored"
        clock.now = later
        second.append(sync(ledger, n8n))
        position_it_left.append(source_row(store)["position"])
        clock.advance(minutes=1)  # whatever the first sync writes from now on is later
        return None

    n8n.intercept = overtake
    first = sync_source(
        ledger,
        SOURCE,
        n8n.client(),
        sleep=lambda seconds: None,
        progress=lambda report: stored_first_page.set(),
    )

    row = source_row(store)
    assert [row["position"]] == position_it_left  # not taken back to the first's second page
    assert (row["status"], row["last_error"], row["last_sync_at"]) == ("ok", None, later)
    assert seen(store) == {
        "6": (T0, T0),
        "5": (T0, T0),
        "4": (later, later),
        "3": (later, later),
        "2": (later, later),
        "1": (later, later),
    }
    assert (first.status, first.pages, first.new) == ("superseded", 1, 2)
    assert first.error == (
        "another sync of prod-n8n moved its position meanwhile; this run stopped and left "
        "the rest to it"
    )
    assert [(r.status, r.error, r.pages, r.new) for r in second] == [("ok", None, 2, 4)]


def test_the_next_page_is_read_while_a_page_is_written(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    # The first page's commit waits (in ``progress``, after it) until the second page has
    # been asked for: that happens only when the read runs beside the write.
    n8n.add(6)  # 6 5 | 4 3 | 2 1
    second_page_asked = threading.Event()
    waited: list[bool] = []

    def note(request: httpx.Request) -> httpx.Response | None:
        if "cursor" in request.url.params:
            second_page_asked.set()
        return None

    def after_page(report: SyncReport) -> None:
        if report.pages == 1:
            waited.append(second_page_asked.wait(timeout=30))

    n8n.intercept = note
    report = sync_source(
        ledger, SOURCE, n8n.client(), sleep=lambda seconds: None, progress=after_page
    )
    assert waited == [True]
    assert (report.ok, report.pages, report.new) == (True, 3, 6)
    assert set(seen(store)) == {str(i) for i in range(1, 7)}
