"""What a sync asks for again and what it marks gone: the refresh of unfinished copies, the walk
of the tool's whole list that notices pruned executions, and the recovery of what the list
shows and the ledger never got, each within its filters and bounds."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads.execution_copies import list_executions
from flowledger.sync import SyncReport, sync_source
from tests.support.builders import FakeClock
from tests.support.database import snapshot
from tests.support.fakes.n8n import KEY, FakeN8n

ENV = "TEST_N8N_API_KEY"
LIST = "/api/v1/executions"


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv(ENV, KEY)
    return FakeN8n()


def sync(ledger: Ledger, n8n: FakeN8n, *, page_size: int = 250, **kw: Any) -> SyncReport:
    cfg = SourceConfig(
        name="prod-n8n", kind="n8n", base_url=n8n.base_url, api_key_env=ENV, page_size=page_size
    )
    return sync_source(ledger, cfg, n8n.client(), sleep=lambda seconds: None, **kw)


def rows(store: Store, **kw: Any) -> dict[str, dict[str, Any]]:
    return {r["external_id"]: r for r in list_executions(store, limit=1000, **kw)}


def read_by_id(n8n: FakeN8n) -> list[str]:
    """The ids the sync asked for one by one, in order."""
    return [r.url.path.rsplit("/", 1)[1] for r in n8n.requests if r.url.path.startswith(LIST + "/")]


# --------------------------------------------------------------------------- the walk


def test_a_running_copy_the_list_leaves_out_is_not_marked_gone_by_the_walk(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    (running,) = n8n.add(1, status="running")  # n8n lists it only once it has ended
    n8n.add(1)
    sync(ledger, n8n)
    clock.advance(hours=2)
    report = sync(ledger, n8n, reconcile=True)
    assert (report.ok, report.reconciled, report.refreshed, report.gone) == (True, True, 1, 0)
    assert rows(store, gone=True) == {}
    assert (rows(store)[running]["status"], rows(store)[running]["final"]) == ("running", False)


def test_a_copy_first_seen_during_the_walk_is_not_marked_gone(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    sync(ledger, n8n, page_size=100)
    clock.advance(hours=2)
    other: list[SyncReport] = []
    newer: list[str] = []
    running = False

    def another_sync_during_the_walk(request: httpx.Request) -> httpx.Response | None:
        # The walk lists 250 at a time, the pages 100: this is the walk's list. It is read
        # before a new execution ends, which another sync of the source stores meanwhile.
        nonlocal running
        if running or request.url.params.get("limit") != "250":
            return None
        running = True
        listed = n8n.serve(request)
        clock.advance(minutes=1)
        newer.extend(n8n.add(1))
        other.append(sync(ledger, n8n, page_size=100, reconcile=False))
        return listed

    n8n.intercept = another_sync_during_the_walk
    walking = sync(ledger, n8n, page_size=100, reconcile=True)

    assert [(r.ok, r.new) for r in other] == [(True, 1)]
    assert walking.gone == 0 and rows(store, gone=True) == {}
    assert rows(store)[newer[0]]["first_seen_at"] == clock.now
    assert (walking.reconciled, walking.status) == (True, "superseded")  # the other moved on


def test_a_copy_already_gone_keeps_the_time_it_went(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    sync(ledger, n8n)
    clock.advance(hours=2)
    n8n.delete("2")
    assert sync(ledger, n8n, reconcile=True).gone == 1
    went = clock.now
    clock.advance(hours=2)
    assert sync(ledger, n8n, reconcile=True).gone == 0
    assert {i: r["gone_at"] for i, r in rows(store).items()} == {"1": None, "2": went, "3": None}


# --------------------------------------------------------------------------- the refresh


def test_a_copy_marked_gone_is_not_asked_for_again(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(2)
    (waiting,) = n8n.add(1, status="waiting")
    sync(ledger, n8n)
    clock.advance(minutes=1)
    n8n.delete(waiting)
    first = sync(ledger, n8n)
    assert (first.refreshed, first.gone, rows(store)[waiting]["gone_at"]) == (1, 1, clock.now)
    clock.advance(minutes=1)
    n8n.requests.clear()
    again = sync(ledger, n8n)
    assert (again.refreshed, again.gone) == (0, 0)
    assert [r.url.path for r in n8n.requests] == [LIST]


def test_a_copy_this_run_stored_is_not_asked_for_again_in_the_same_run(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(2)
    (running,) = n8n.add(1, status="running")  # left out of the list: read by id
    n8n.add(1)
    report = sync(ledger, n8n)
    assert (report.new, report.refreshed) == (4, 0)
    assert read_by_id(n8n) == [running]


def test_a_refresh_answered_with_another_execution_stops_the_source_and_changes_no_copy(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(1)
    (running,) = n8n.add(1, status="running")
    (other,) = n8n.add(1)
    sync(ledger, n8n)
    before = snapshot(store)["executions"]
    clock.advance(minutes=1)
    n8n.intercept = lambda request: (
        httpx.Response(200, json=n8n.record(other))
        if request.url.path == f"{LIST}/{running}"
        else None
    )
    n8n.requests.clear()
    report = sync(ledger, n8n)
    assert (report.status, report.error) == (
        "stopped",
        f"asked for execution {running}, n8n answered {other}",
    )
    assert snapshot(store)["executions"] == before
    assert [r.url.path for r in n8n.requests] == [LIST, f"{LIST}/{running}"]  # the refresh


def test_a_run_refreshes_at_most_500_copies_the_longest_unseen_first(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(600, status="waiting")
    sync(ledger, n8n)  # stored newest first: 600 down to 1
    clock.advance(minutes=1)
    n8n.requests.clear()
    assert sync(ledger, n8n).refreshed == 500
    assert read_by_id(n8n) == [str(i) for i in range(600, 100, -1)]
    clock.advance(minutes=1)
    n8n.requests.clear()
    assert sync(ledger, n8n).refreshed == 500
    assert read_by_id(n8n)[:100] == [str(i) for i in range(100, 0, -1)]


# --------------------------------------------------------------------------- the recovery


def test_a_walk_recovers_at_most_500_executions_and_the_rest_on_the_next(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(2)
    sync(ledger, n8n)
    hidden = n8n.add(700, status="waiting")
    n8n.unlisted.update(int(i) for i in hidden)
    n8n.add(1)
    sync(ledger, n8n)  # the newest 100 holes are read by id; 600 are never seen
    assert len(rows(store)) == 103
    for ext_id in hidden:
        n8n.set_status(ext_id, "success")
    n8n.unlisted.clear()
    clock.advance(hours=2)
    first = sync(ledger, n8n)
    assert (first.reconciled, first.recovered, first.new) == (True, 500, 500)
    assert len(rows(store)) == 603
    clock.advance(hours=2)
    second = sync(ledger, n8n)
    assert (second.reconciled, second.recovered, second.new) == (True, 100, 100)
    assert set(rows(store)) == n8n.ids()
