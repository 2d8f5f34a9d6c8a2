"""Nothing is marked gone, and nothing skipped, because a list changed while it was paged: the
walk pages Airflow's run list with overlap, and a copy the walk did not see is marked gone
only once a read by id answers 404 (at most ``GONE_CHECK_LIMIT`` a run)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from flowledger.config import SourceConfig
from flowledger.connectors import registry
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads.execution_copies import list_executions
from flowledger.sync import SyncReport, runner, sync_source
from tests.support.builders import FakeClock
from tests.support.fakes.airflow import FakeAirflow
from tests.support.fakes.n8n import KEY, FakeN8n

PAGE = 40


def sync(ledger: Ledger, fake: Any, **kw: Any) -> SyncReport:
    cfg = SourceConfig(
        name="tool",
        kind=fake.kind,
        base_url=fake.base_url,
        api_key_env="TEST_API_KEY" if registry.KINDS[fake.kind].needs_api_key else None,
        page_size=PAGE,
    )
    return sync_source(ledger, cfg, fake.client(), sleep=lambda s: None, **kw)


def kept(store: Store, **kw: Any) -> dict[str, dict[str, Any]]:
    return {r["external_id"]: r for r in list_executions(store, limit=1000, **kw)}


def gone(store: Store) -> set[str]:
    return set(kept(store, gone=True))


def walked(fake: FakeAirflow, number: int) -> httpx.Request:
    """The ``number``-th list request (1 is the first), checked to be a page of the walk of the
    whole list (no ``updated_at_gte``) past its first."""
    request = fake.list_requests()[number - 1]
    assert "updated_at_gte" not in request.url.params and request.url.params["offset"] != "0"
    return request


@pytest.mark.parametrize("deleted_at", [38, 4], ids=["end-of-first-page", "early-in-first-page"])
def test_a_run_deleted_between_two_pages_of_the_walk_is_gone_and_no_present_run_is(
    ledger: Ledger, store: Store, clock: FakeClock, deleted_at: int
) -> None:
    airflow = FakeAirflow()
    names = airflow.add(100)
    sync(ledger, airflow)
    clock.advance(hours=2)
    deleted = names[deleted_at]  # on the walk's first page: every later run moves back one
    airflow.requests.clear()
    # list request 1 is the incremental read (nothing new), 2 the walk's first page, 3 its second
    airflow.before_list[3] = lambda: airflow.delete(deleted)
    report = sync(ledger, airflow, reconcile=True)
    walked(airflow, 3)
    assert report.ok and report.reconciled
    assert set(kept(store, gone=False)) - {deleted} == airflow.ids()
    if deleted_at == 4:
        # read on the first page before it went: present for this walk, gone by the next
        assert (report.gone, gone(store)) == (0, set())
        clock.advance(hours=2)
        report = sync(ledger, airflow, reconcile=True)
    assert (report.gone, gone(store)) == (1, {deleted})
    assert set(kept(store, gone=False)) == airflow.ids()


def test_many_runs_deleted_between_two_pages_of_the_walk_skip_nothing(
    ledger: Ledger, store: Store, clock: FakeClock
) -> None:
    airflow = FakeAirflow()
    names = airflow.add(200)
    sync(ledger, airflow)
    clock.advance(hours=2)
    deleted = names[10:60]  # read already, and more than a page: the walk steps back
    airflow.requests.clear()
    airflow.before_list[4] = lambda: [airflow.delete(n) for n in deleted]
    report = sync(ledger, airflow, reconcile=True)
    walked(airflow, 4)
    assert (report.ok, report.gone, gone(store)) == (True, 0, set())
    clock.advance(hours=2)
    report = sync(ledger, airflow, reconcile=True)
    assert (report.ok, report.gone, gone(store)) == (True, len(deleted), set(deleted))
    assert set(kept(store, gone=False)) == airflow.ids()


@pytest.mark.parametrize("delete", [False, True], ids=["added", "added-and-deleted"])
def test_a_run_added_between_pages_of_the_incremental_walk_is_fetched_and_nothing_skipped(
    ledger: Ledger, store: Store, clock: FakeClock, delete: bool
) -> None:
    airflow = FakeAirflow()
    airflow.add(5)
    sync(ledger, airflow)
    clock.advance(minutes=10)
    new = airflow.add(100)
    added: list[str] = []

    def change() -> None:
        added.extend(airflow.add(1))
        if delete:  # read on the first page: every later run moves one place back
            airflow.delete(new[3])

    airflow.requests.clear()
    airflow.before_list[2] = change
    report = sync(ledger, airflow, reconcile=False)
    second = airflow.list_requests()[1]
    assert "updated_at_gte" in second.url.params and second.url.params["offset"] != "0"
    assert report.ok and report.new == 101
    assert added[0] in kept(store)
    assert set(kept(store)) == airflow.ids() | ({new[3]} if delete else set())


def test_a_run_that_enters_the_incremental_list_behind_the_walk_is_fetched_by_the_next_sync(
    ledger: Ledger, store: Store, clock: FakeClock
) -> None:
    """An old, finished run cleared and run again while the list is paged joins it at its
    place in id order, behind the page being read: every later row moves one place on (read
    twice, kept once), and the run itself is read by the next sync, whose window starts
    before the update (a finished copy is not refreshed by id)."""
    airflow = FakeAirflow()
    old = airflow.add(3)
    sync(ledger, airflow)
    clock.advance(minutes=10)
    new = airflow.add(100)
    airflow.requests.clear()
    airflow.before_list[2] = lambda: airflow.set_status(old[1], "running")
    first = sync(ledger, airflow, reconcile=False)
    assert first.ok and first.new == 100 and set(new) <= set(kept(store))
    assert kept(store)[old[1]]["status"] == "success"  # updated behind the walk
    clock.advance(minutes=10)
    second = sync(ledger, airflow, reconcile=False)
    assert second.ok and kept(store)[old[1]]["status"] == "running"
    assert set(kept(store)) == airflow.ids()


def test_a_present_execution_the_walk_did_not_see_is_not_marked_gone(
    ledger: Ledger, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_API_KEY", KEY)
    n8n = FakeN8n()
    n8n.add(10)
    sync(ledger, n8n)
    clock.advance(hours=2)
    n8n.delete("3")
    hidden = "7"  # still in n8n, but left out of the walk's list

    def without_hidden(request: httpx.Request) -> httpx.Response | None:
        if request.url.path != n8n.list_path:
            return None
        answer = n8n.serve(request)
        body = answer.json()
        body["data"] = [item for item in body["data"] if item["id"] != hidden]
        return httpx.Response(200, json=body)

    n8n.intercept = without_hidden
    report = sync(ledger, n8n, reconcile=True)
    assert (report.ok, report.gone, report.unchecked) == (True, 1, 0)
    assert gone(store) == {"3"}
    assert kept(store)[hidden]["gone_at"] is None
    by_id = n8n.list_path + "/"
    asked = [r.url.path.removeprefix(by_id) for r in n8n.requests if r.url.path.startswith(by_id)]
    assert sorted(asked) == ["3", hidden]


def test_at_most_the_limit_is_asked_for_in_a_run_and_the_rest_on_the_next(
    ledger: Ledger, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_API_KEY", KEY)
    monkeypatch.setattr(runner, "GONE_CHECK_LIMIT", 30)
    n8n = FakeN8n()
    n8n.add(60)
    sync(ledger, n8n)
    clock.advance(hours=2)
    pruned = n8n.prune(45)
    first = sync(ledger, n8n, reconcile=True)
    assert (first.ok, first.gone, first.unchecked) == (True, 30, 15)
    assert any("15 copies" in note for note in first.notes)
    assert len(gone(store)) == 30 and gone(store) < set(pruned)
    assert all(kept(store)[i]["gone_at"] is None for i in n8n.ids())
    clock.advance(hours=2)
    second = sync(ledger, n8n, reconcile=True)
    assert (second.gone, second.unchecked) == (15, 0)
    assert gone(store) == set(pruned)
