"""The sync service against a fake n8n, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage import executions
from flowledger.storage.engine import Store
from flowledger.storage.problems import Missing
from flowledger.storage.reads import chain
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.execution_copies import list_executions
from flowledger.sync import Backoff, runner, sync_source
from tests.support.builders import FakeClock, req
from tests.support.fakes.n8n import KEY, FakeN8n

ENV = "TEST_N8N_API_KEY"


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv(ENV, KEY)
    return FakeN8n()


def source(**kw: Any) -> SourceConfig:
    values: dict[str, Any] = {
        "name": "prod-n8n",
        "kind": "n8n",
        "base_url": FakeN8n.base_url,
        "api_key_env": ENV,
    }
    values.update(kw)
    return SourceConfig(**values)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def sync(ledger: Ledger, fake: FakeN8n, sleep: Sleeps | None = None, **kw: Any) -> Any:
    cfg_kw = {k: kw.pop(k) for k in list(kw) if k in SourceConfig.model_fields}
    return sync_source(
        ledger,
        source(**cfg_kw),
        fake.client(),
        sleep=sleep if sleep is not None else Sleeps(),
        **kw,
    )


def rows(store: Store, **kw: Any) -> dict[str, dict[str, Any]]:
    return {r["external_id"]: r for r in list_executions(store, limit=1000, **kw)}


def source_row(store: Store) -> dict[str, Any]:
    return {s["name"]: s for s in queries.list_sources(store)}["prod-n8n"]


def linked_events(store: Store) -> list[dict[str, Any]]:
    return [e for e in queries.iter_events(store) if e["kind"] == "execution_linked"]


def test_first_backfill_mirrors_every_execution_page_by_page(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(600)
    report = sync(ledger, n8n)
    assert (report.ok, report.pages, report.new) == (True, 3, 600)
    kept = rows(store)
    assert set(kept) == n8n.ids()
    assert kept["42"]["workflow_name"] == "send invoices" and kept["42"]["final"] is True
    assert source_row(store)["status"] == "ok"


def test_a_backfill_on_postgresql_analyzes_the_copies_as_their_count_doubles(
    ledger: Ledger, store: Store, n8n: FakeN8n, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page looks its copies up by source and id; without statistics (autovacuum off,
    or behind a backfill) PostgreSQL planned that as a scan of every copy of the source."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite plans the lookup from its indexes alone")
    monkeypatch.setattr(runner, "ANALYZE_AFTER", 500)
    analyze = executions.analyze
    counted: list[float] = []

    def analyze_and_read_the_count(store: Store) -> None:
        analyze(store)
        with store.engine.connect() as conn:
            counted.append(
                conn.exec_driver_sql(
                    "SELECT reltuples FROM pg_class WHERE relname = 'executions'"
                ).scalar_one()
            )

    monkeypatch.setattr(executions, "analyze", analyze_and_read_the_count)
    n8n.add(1200)
    assert sync(ledger, n8n).new == 1200  # pages of 250
    assert counted == [500, 1000]
    n8n.add(10)
    assert sync(ledger, n8n).new == 10  # a later run counts its own new copies
    assert counted == [500, 1000]


def test_analyze_passes_over_a_table_another_holds_and_says_so(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A VACUUM or an index build holding the copies does not hold up a backfill."""
    if store.dialect != "postgresql":
        pytest.skip("SQLite plans the lookup from its indexes alone")
    holder = sa.create_engine(store.url)
    with holder.connect() as conn:
        conn.exec_driver_sql("LOCK TABLE executions IN SHARE UPDATE EXCLUSIVE MODE")
        analyzing = threading.Thread(target=executions.analyze, args=(store,))
        analyzing.start()
        analyzing.join(60)  # only a bound on a failure: without SKIP_LOCKED it waits
        waited = analyzing.is_alive()
        conn.rollback()
    analyzing.join()
    holder.dispose()
    assert not waited
    assert 'skipping analyze of "executions"' in caplog.text


def test_incremental_sync_reads_only_what_is_new_in_one_request(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(300)
    sync(ledger, n8n)
    n8n.requests.clear()
    assert sync(ledger, n8n).new == 0
    assert len(n8n.requests) == 1
    n8n.add(7)
    report = sync(ledger, n8n)
    assert report.new == 7 and set(rows(store)) == n8n.ids()


def test_a_running_execution_is_refreshed_until_final(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    (running,) = n8n.add(1, status="running")
    n8n.add(2)  # newer ones make the running execution a hole in the list
    sync(ledger, n8n)
    assert rows(store)[running]["status"] == "running" and not rows(store)[running]["final"]
    clock.advance(minutes=1)
    n8n.set_status(running, "error")
    report = sync(ledger, n8n)
    assert report.refreshed == 1
    kept = rows(store)[running]
    assert (kept["status"], kept["final"]) == ("error", True) and kept["stopped_at"] is not None
    n8n.requests.clear()
    sync(ledger, n8n)
    assert [r.url.path for r in n8n.requests] == ["/api/v1/executions"]  # final: not asked again


def test_a_waiting_execution_missing_from_the_list_is_still_kept(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(2)
    sync(ledger, n8n)
    (waiting,) = n8n.add(1, status="waiting")
    n8n.unlisted.add(int(waiting))
    n8n.add(1)
    sync(ledger, n8n)
    assert rows(store)[waiting]["status"] == "waiting"


def test_a_deleted_execution_keeps_its_copy_with_gone_at(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    (waiting,) = n8n.add(1, status="waiting")
    sync(ledger, n8n)
    clock.advance(minutes=5)
    n8n.delete(waiting)
    n8n.delete("2")
    report = sync(ledger, n8n, reconcile=True)
    assert report.gone == 2
    kept = rows(store)
    assert kept[waiting]["gone_at"] == clock.now and kept[waiting]["status"] == "waiting"
    assert kept["2"]["gone_at"] == clock.now and kept["2"]["status"] == "success"
    assert set(rows(store, gone=True)) == {waiting, "2"}
    assert set(rows(store, gone=False)) == {"1", "3"}


def test_a_copy_the_tool_shows_again_is_no_longer_gone(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(3)
    (waiting,) = n8n.add(1, status="waiting")
    sync(ledger, n8n)
    shown = dict(n8n.executions[int(waiting)])
    clock.advance(minutes=5)
    n8n.delete(waiting)
    assert sync(ledger, n8n, reconcile=True).gone == 1
    n8n.executions[int(waiting)] = shown  # restored in n8n (from a backup, say)
    clock.advance(hours=2)
    sync(ledger, n8n, reconcile=True)
    assert rows(store)[waiting]["gone_at"] is None


def test_pruning_by_the_tool_loses_nothing_from_the_ledger(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(400)
    sync(ledger, n8n)
    before = rows(store)
    clock.advance(hours=2)  # past the reconcile interval
    pruned = n8n.prune(150)
    n8n.add(20)
    report = sync(ledger, n8n)
    assert report.reconciled and report.gone == 150 and report.new == 20
    after = rows(store)
    assert set(after) == set(before) | n8n.ids()
    for ext_id in pruned:
        copy = after[ext_id]
        assert copy["gone_at"] == clock.now
        for column in ("status", "workflow_name", "started_at", "stopped_at", "mode"):
            assert copy[column] == before[ext_id][column]
    assert all(after[i]["gone_at"] is None for i in n8n.ids())


def test_executions_link_to_operations_by_attempt_and_retry_chain_once(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    (crashed,) = n8n.add(1, status="crashed")
    ledger.dispatch("invoice:INV-9:send", req(crashed)).run("token:n8n")
    (retry,) = n8n.add(1, mode="retry", retry_of=crashed)
    (again,) = n8n.add(1, mode="retry", retry_of=retry)
    n8n.add(1)
    report = sync(ledger, n8n)
    assert report.linked == 3
    kept = rows(store)
    assert kept[retry]["retry_of"] == crashed and kept[crashed]["retry_success_id"] == retry
    events = linked_events(store)
    assert {(e["data"]["execution_id"], e["data"]["via"]) for e in events} == {
        (crashed, "attempt"),
        (retry, "retry_of"),
        (again, "retry_of"),
    }
    assert all(e["operation_id"] == "invoice:INV-9:send" for e in events)
    assert all(e["actor"] == "sync:prod-n8n" for e in events)
    sync(ledger, n8n, reconcile=True)
    assert len(linked_events(store)) == 3
    with store.reader.connect() as conn:
        assert chain.verify(conn).ok


def test_an_attempt_from_another_source_is_not_linked(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    (ext_id,) = n8n.add(1)
    ledger.dispatch("op:elsewhere", req(ext_id, source="staging-n8n")).run("t")
    assert sync(ledger, n8n).linked == 0


def test_an_attempt_of_another_workflow_with_the_same_execution_id_is_not_linked(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    """Execution ids repeat across n8n instances; an attempt that names no source is linked
    only to an execution of its own workflow."""
    (ext_id,) = n8n.add(1, workflow_id="wf-other")
    ledger.dispatch("op:same-id", req(ext_id)).run("t")  # workflow wf-1, no source
    assert sync(ledger, n8n).linked == 0
    (mine,) = n8n.add(1)  # wf-1
    ledger.dispatch("op:mine", req(mine)).run("t")
    assert sync(ledger, n8n).linked == 1


def test_custom_data_links_an_execution_that_never_called_the_ledger(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    ledger.prepare("crm:ACME:upsert", processing_version="v1", input={"a": 1}, has_input=True).run(
        "t"
    )
    (ext_id,) = n8n.add(1, workflow_id="wf-2")
    n8n.custom[int(ext_id)] = {"ledger.operation_id": "crm:ACME:upsert"}
    report = sync(ledger, n8n, custom_data_workflows=["wf-2"])
    assert report.linked == 1
    (event,) = linked_events(store)
    assert (event["operation_id"], event["data"]["via"]) == ("crm:ACME:upsert", "custom_data")
    assert json.loads(rows(store)[ext_id]["extra"])["operation_id"] == "crm:ACME:upsert"


def test_429_and_5xx_wait_as_told_and_lose_nothing(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(600)
    page_two = n8n.add(0)
    assert page_two == []
    n8n.inject(httpx.Response(429, headers={"retry-after": "7"}, json={"message": "slow down"}))
    n8n.inject(httpx.Response(503, text="upstream down"))
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps)
    assert sleeps == [7.0, 2.0] and report.waited == 9.0
    assert report.ok and set(rows(store)) == n8n.ids()


def test_a_retry_after_beyond_the_bound_ends_the_run_with_an_error(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(3)
    n8n.inject(httpx.Response(429, headers={"retry-after": "3600"}))
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps, backoff=Backoff(max_wait=60))
    assert sleeps == [] and report.status == "error" and "3600" in (report.error or "")
    assert source_row(store)["status"] == "error"


def test_backoff_gives_up_after_its_retries(ledger: Ledger, store: Store, n8n: FakeN8n) -> None:
    n8n.add(3)
    for _ in range(4):
        n8n.inject(httpx.Response(500, json={"message": "boom"}))
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps, backoff=Backoff(retries=3, base=1))
    assert sleeps == [1, 2, 4] and report.status == "error" and "500" in (report.error or "")


def test_a_custom_data_read_that_keeps_failing_is_passed_over_after_the_retries(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(10)
    n8n.intercept = lambda request: (
        httpx.Response(500, json={"message": "Internal error"})
        if request.url.path == "/api/v1/executions/5"
        else None
    )
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps, backoff=Backoff(retries=3), custom_data_workflows=["wf-1"])
    assert sleeps == [1, 2, 4] and report.ok and set(rows(store)) == n8n.ids()
    assert "500" in json.loads(rows(store)["5"]["extra"])["custom_data"]
    assert report.notes == [
        "passed over the read of customData of execution 5: n8n at "
        "http://n8n.test/api/v1/executions/5 failed with 500: Internal error"
    ]
    newer = n8n.add(5)
    again = sync(ledger, n8n, custom_data_workflows=["wf-1"])
    assert again.ok and again.new == 5 and set(newer) <= set(rows(store))


def test_a_hole_n8n_keeps_failing_to_read_is_left_for_the_walk_of_the_list(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(2)
    sync(ledger, n8n)
    (waiting,) = n8n.add(1, status="waiting")
    n8n.unlisted.add(int(waiting))
    n8n.add(2)
    n8n.intercept = lambda request: (
        httpx.Response(502, text="bad gateway")
        if request.url.path == f"/api/v1/executions/{waiting}"
        else None
    )
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps, backoff=Backoff(retries=2))
    assert sleeps == [1, 2] and report.ok and set(rows(store)) == n8n.ids() - {waiting}
    assert report.notes[0].startswith(f"passed over the read of execution {waiting}: ")
    n8n.intercept = None
    n8n.set_status(waiting, "success")
    n8n.unlisted.clear()
    clock.advance(hours=2)
    later = sync(ledger, n8n)
    assert later.recovered == 1 and set(rows(store)) == n8n.ids()


def test_a_malformed_page_stops_the_source_and_keeps_what_is_stored(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(600)

    def second_page_broken(request: httpx.Request) -> httpx.Response | None:
        if "cursor" in request.url.params:
            return httpx.Response(
                200, json={"data": [{"id": "x", "status": None}], "nextCursor": None}
            )
        return None

    n8n.intercept = second_page_broken
    report = sync(ledger, n8n)
    assert report.status == "stopped" and report.pages == 1
    row = source_row(store)
    assert row["status"] == "stopped" and "not a number" in row["last_error"]
    assert len(rows(store)) == 250
    n8n.intercept = None
    again = sync(ledger, n8n)
    assert again.ok and again.new == 350 and set(rows(store)) == n8n.ids()
    assert source_row(store)["status"] == "ok" and source_row(store)["last_error"] is None


def test_a_401_stops_the_source_and_the_key_is_never_stored(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(5)
    sync(ledger, n8n)
    n8n.api_key = "rotated-key"
    report = sync(ledger, n8n)
    assert report.status == "stopped" and "401" in (report.error or "")
    assert "refused the credentials" in source_row(store)["last_error"]
    assert len(rows(store)) == 5
    with store.engine.connect() as conn:
        for table in ("sources", "executions", "events"):
            for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                assert KEY not in repr(tuple(row))


def test_a_missing_environment_variable_is_named(
    ledger: Ledger, store: Store, n8n: FakeN8n, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV)
    report = sync(ledger, n8n)
    assert report.status == "stopped" and ENV in (report.error or "") and n8n.requests == []


def test_n8n_still_starting_is_waited_for_and_never_read_as_data(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(4)
    starting = httpx.Response(
        200, text="n8n is starting up. Please wait", headers={"content-type": "text/html"}
    )
    n8n.inject(starting)
    n8n.inject(starting)
    sleeps = Sleeps()
    report = sync(ledger, n8n, sleeps)
    assert len(sleeps) == 2 and report.ok and set(rows(store)) == n8n.ids()


def test_a_stale_cursor_lists_again_from_the_newest_without_duplicates(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(600)

    def refuse_the_second_page(request: httpx.Request) -> httpx.Response | None:
        if "cursor" in request.url.params:
            return httpx.Response(401, json={"message": "unauthorized"})
        return None

    n8n.intercept = refuse_the_second_page
    assert sync(ledger, n8n).pages == 1
    n8n.intercept = None
    n8n.inject(httpx.Response(400, json={"message": "An invalid cursor was provided"}))
    report = sync(ledger, n8n)
    assert report.ok and set(rows(store)) == n8n.ids() and len(rows(store)) == 600


def test_a_cursor_refused_again_after_listing_from_the_newest_stops_the_source(
    ledger: Ledger, store: Store, n8n: FakeN8n
) -> None:
    n8n.add(300)
    n8n.intercept = lambda request: (
        httpx.Response(400, json={"message": "An invalid cursor was provided"})
        if "cursor" in request.url.params
        else None
    )

    def bounded(report: Any) -> None:
        if report.pages > 10:
            pytest.fail("the sync kept listing from the newest")

    report = sync(ledger, n8n, progress=bounded)
    assert report.status == "stopped" and report.pages == 2 and len(rows(store)) == 250
    row = source_row(store)
    assert row["status"] == "stopped" and "refused a cursor again" in row["last_error"]


def test_list_executions_pages_by_keyset_most_recent_first(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(25)
    clock.advance(hours=1)  # the sync runs after they started
    for i in range(1, 9):  # queued: no start time yet, ordered by when first seen (a tie)
        n8n.executions[i]["startedAt"] = None
    sync(ledger, n8n)
    seen: list[str] = []
    after = None
    while True:
        page = list_executions(store, source="prod-n8n", after=after, limit=4)
        if not page:
            break
        seen.extend(r["external_id"] for r in page)
        after = page[-1]["id"]
    assert len(seen) == len(set(seen)) == 25
    assert set(seen[:8]) == {str(i) for i in range(1, 9)}  # seen at the run's time, later
    assert seen[8:] == [str(i) for i in range(25, 8, -1)]
    assert list_executions(store, status="error") == []
    with pytest.raises(Missing, match="1000000000"):  # a page after no row: said, not empty
        list_executions(store, after=10**9)


def test_an_empty_list_from_a_tool_that_held_executions_marks_nothing_gone(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(30)
    sync(ledger, n8n)
    clock.advance(hours=2)
    n8n.intercept = lambda request: httpx.Response(200, json={"data": [], "nextCursor": None})
    report = sync(ledger, n8n)
    assert report.ok and report.gone == 0 and "listed no executions" in report.notes[0]
    assert rows(store, gone=True) == {}


def test_executions_past_the_probe_budget_are_recovered_when_the_list_shows_them(
    ledger: Ledger, store: Store, clock: FakeClock, n8n: FakeN8n
) -> None:
    n8n.add(2)
    sync(ledger, n8n)
    hidden = n8n.add(130, status="waiting")
    n8n.unlisted.update(int(i) for i in hidden)
    n8n.add(1)
    sync(ledger, n8n)
    assert len(set(hidden) - set(rows(store))) == 30  # 100 probed, the oldest 30 not
    for ext_id in hidden:
        n8n.set_status(ext_id, "success")
    n8n.unlisted.clear()
    clock.advance(hours=2)
    report = sync(ledger, n8n)
    assert report.reconciled and report.recovered == 30 and report.new == 30
    assert set(rows(store)) == n8n.ids()
    assert all(rows(store)[i]["status"] == "success" for i in hidden)
