"""Stale workflow versions on SQLite and PostgreSQL, against the fake n8n: the sync reads the
version each execution that dispatched an operation ran (once, by id, within
``version_reads`` a run) and each such workflow's active version since its last activation; a
dispatch made by a version other than the one active then opens one non-blocking
``stale_workflow_version`` hold per workflow and version pair. Whatever n8n answers that does
not tell both never holds and never stops the sync."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.cli import sources as sources_cli
from flowledger.config import SourceConfig
from flowledger.reports import handover
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain, records
from flowledger.storage.reads.replay import deep_verify
from flowledger.sync import sync_source
from tests.support.builders import T0, FakeClock, req
from tests.support.cli import cli
from tests.support.fakes.n8n import KEY, FakeN8n

ENV = "TEST_N8N_API_KEY"
OLD, NEW = "57db12a8-old", "f61fba83-new"


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv(ENV, KEY)
    fake = FakeN8n()
    fake.publish("wf-1", OLD, T0 - timedelta(hours=1))
    return fake


def sync(ledger: Ledger, fake: FakeN8n, *, reconcile: bool | None = None, **kw: Any) -> Any:
    cfg = SourceConfig(
        name="prod-n8n", kind="n8n", base_url=FakeN8n.base_url, api_key_env=ENV, **kw
    )
    return sync_source(ledger, cfg, fake.client(), sleep=lambda _: None, reconcile=reconcile)


def dispatch(ledger: Ledger, execution_id: str, operation: str = "invoice:INV-42:send") -> None:
    ledger.dispatch(operation, req(execution_id, source="prod-n8n")).run("workflow")


def stale_holds(store: Store) -> list[Any]:
    with store.reader.connect() as conn:
        return list(
            conn.execute(
                sa.text(
                    "SELECT id, cause_key, blocking, operation_id, execution_id, detail,"
                    " occurrences FROM holds WHERE reason = 'stale_workflow_version' ORDER BY id"
                )
            ).mappings()
        )


def observations(store: Store) -> list[dict[str, Any]]:
    return [
        {**ev["data"], "operation_id": ev["operation_id"], "hold": ev["hold_id"]}
        for ev in records.iter_events(store)
        if ev["kind"] == "stale_workflow_version"
    ]


def by_id_reads(fake: FakeN8n, execution_id: str) -> int:
    path = f"/api/v1/executions/{execution_id}"
    return sum(1 for r in fake.requests if r.url.path == path)


def workflow_reads(fake: FakeN8n) -> int:
    return sum(1 for r in fake.requests if r.url.path.startswith("/api/v1/workflows/"))


def clean(store: Store) -> None:
    with store.reader.connect() as conn:
        assert chain.verify(conn).ok
        found = deep_verify(conn)
        assert found.ok, found


def republished_while_waiting(fake: FakeN8n, clock: FakeClock, ledger: Ledger) -> str:
    """Execution 1 starts on the old version (T0+1s), the workflow is published again (T0+2s)
    and, its wait over, the execution dispatches (T0+10s)."""
    (execution,) = fake.add(1)
    fake.publish("wf-1", NEW, T0 + timedelta(seconds=2))
    clock.now = T0 + timedelta(seconds=10)
    dispatch(ledger, execution)
    return execution


def test_a_dispatch_by_the_version_replaced_opens_one_hold_naming_both(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    execution = republished_while_waiting(n8n, clock, ledger)
    clock.advance(seconds=30)
    report = sync(ledger, n8n)
    assert report.ok and (report.versions_read, report.stale_versions) == (1, 1)
    (hold,) = stale_holds(store)
    assert hold["cause_key"] == f"stale_workflow_version:prod-n8n:wf-1:{OLD}:{NEW}"
    assert not hold["blocking"] and hold["operation_id"] is None
    assert hold["execution_id"] == execution
    assert hold["detail"] == (
        f"workflow wf-1 ran an outdated version: execution {execution} ran version {OLD} and "
        f"dispatched invoice:INV-42:send while {NEW} was active"
    )
    (seen,) = observations(store)
    assert seen == {
        "source": "prod-n8n",
        "workflow_id": "wf-1",
        "execution_id": execution,
        "ran": OLD,
        "active": NEW,
        "opened_hold": True,
        "operation_id": "invoice:INV-42:send",
        "hold": hold["id"],
    }
    # The next runs ask for nothing again and hold nothing again.
    clock.advance(minutes=1)
    again = sync(ledger, n8n, reconcile=True)
    assert again.ok and (again.versions_read, again.stale_versions) == (0, 0)
    assert by_id_reads(n8n, execution) == 1
    assert len(stale_holds(store)) == 1 and len(observations(store)) == 1
    clean(store)


def test_the_hold_shows_in_status_show_and_the_handover(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    execution = republished_while_waiting(n8n, clock, ledger)
    clock.advance(seconds=30)
    report_of_first_sync = sync(ledger, n8n)
    url = str(store.url) if store.url.drivername != "sqlite" else str(store.url.database)
    code, out, _ = cli("status", "--db", url)
    assert code == 0 and "stale_workflow_version" in out
    # The line `flowledger sync` prints.
    assert "1 version read (1 stale)" in sources_cli._summary(report_of_first_sync)
    code, out, _ = cli("show", "invoice:INV-42:send", "--db", url)
    assert code == 0 and "outdated workflow versions" in out
    assert f"execution {execution} of workflow wf-1 ran version {OLD} while {NEW}" in out
    report = handover.build(store, handover.Shift(T0, clock.now), now=clock.now)
    assert "## Outdated workflow versions" in report
    assert f"ran version {OLD}" in report


def test_every_further_execution_of_the_pair_counts_on_the_one_hold(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    first = republished_while_waiting(n8n, clock, ledger)
    n8n.ran[int(n8n.add(1)[0])] = OLD  # started after the publish, yet ran the old version
    second = str(n8n.next_id - 1)
    dispatch(ledger, second, "invoice:INV-43:send")
    clock.advance(seconds=30)
    assert sync(ledger, n8n).stale_versions == 2
    (hold,) = stale_holds(store)
    assert hold["occurrences"] == 2 and f"also execution {second} ran" in hold["detail"]
    assert {o["execution_id"] for o in observations(store)} == {first, second}
    assert workflow_reads(n8n) == 1  # once a run for both


def test_an_execution_that_ran_the_active_version_is_not_held(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    n8n.publish("wf-1", NEW, T0)
    (execution,) = n8n.add(1)  # runs NEW
    clock.now = T0 + timedelta(seconds=10)
    dispatch(ledger, execution)
    clock.advance(seconds=30)
    report = sync(ledger, n8n)
    assert report.ok and (report.versions_read, report.stale_versions) == (1, 0)
    assert stale_holds(store) == []


def test_a_dispatch_before_the_publish_the_ledger_read_is_not_judged(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    """The old version was active when execution 1 dispatched, but the ledger never read it
    active: it does not know, so it holds nothing."""
    (execution,) = n8n.add(1)
    clock.now = T0 + timedelta(seconds=1)
    dispatch(ledger, execution)
    n8n.publish("wf-1", NEW, T0 + timedelta(seconds=5))
    clock.now = T0 + timedelta(seconds=60)
    report = sync(ledger, n8n)
    assert report.ok and report.versions_read == 1 and stale_holds(store) == []


def test_only_executions_that_dispatched_are_read(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    ids = n8n.add(5)
    clock.now = T0 + timedelta(seconds=10)
    dispatch(ledger, ids[2])
    sync(ledger, n8n)
    assert [by_id_reads(n8n, i) for i in ids] == [0, 0, 1, 0, 0]


def test_reads_past_the_bound_wait_for_the_next_run_oldest_first(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    ids = n8n.add(5)
    n8n.publish("wf-1", NEW, T0 + timedelta(seconds=6))
    clock.now = T0 + timedelta(seconds=10)
    for n, execution in enumerate(ids):
        dispatch(ledger, execution, f"invoice:INV-{n}:send")
    clock.advance(seconds=30)
    first = sync(ledger, n8n, version_reads=2)
    assert first.ok and first.versions_read == 2
    assert "3 executions' workflow versions left to read on the next run" in first.notes
    assert [by_id_reads(n8n, i) for i in ids] == [1, 1, 0, 0, 0]
    clock.advance(minutes=1)
    second = sync(ledger, n8n, version_reads=2)
    third = sync(ledger, n8n, version_reads=2)
    assert (second.versions_read, third.versions_read) == (2, 1)
    assert [by_id_reads(n8n, i) for i in ids] == [1, 1, 1, 1, 1]
    (hold,) = stale_holds(store)
    assert hold["occurrences"] == 5


def test_zero_version_reads_turns_the_check_off(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    execution = republished_while_waiting(n8n, clock, ledger)
    report = sync(ledger, n8n, version_reads=0)
    assert report.ok and report.versions_read == 0 and by_id_reads(n8n, execution) == 0
    assert workflow_reads(n8n) == 0 and stale_holds(store) == []


@pytest.mark.parametrize("bad", [-1, 10_001, "many"])
def test_version_reads_out_of_range_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="version_reads"):
        SourceConfig(name="n", kind="n8n", base_url=FakeN8n.base_url, version_reads=bad)


def test_a_second_dispatch_of_an_execution_read_before_is_judged_without_a_read(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    (execution,) = n8n.add(1, status="waiting")
    clock.now = T0 + timedelta(seconds=3)
    dispatch(ledger, execution, "invoice:INV-1:send")  # before the publish: fine
    sync(ledger, n8n)
    n8n.publish("wf-1", NEW, T0 + timedelta(seconds=10))
    clock.now = T0 + timedelta(seconds=20)
    dispatch(ledger, execution, "invoice:INV-2:send")  # the same execution, after it
    n8n.set_status(execution, "success")
    clock.advance(seconds=30)
    report = sync(ledger, n8n)
    assert report.ok and report.versions_read == 0 and report.stale_versions == 1
    (seen,) = observations(store)
    assert seen["operation_id"] == "invoice:INV-2:send"


def held_nothing(ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock, hostile: Any) -> Any:
    """The re-published case, synced once n8n answers as ``hostile`` makes it: the run's
    report, after checking that it went on and held nothing."""
    republished_while_waiting(n8n, clock, ledger)
    clock.advance(seconds=30)
    hostile()
    report = sync(ledger, n8n)
    assert report.ok and report.stale_versions == 0 and stale_holds(store) == []
    return report


def _hostile_execution(fake: FakeN8n, answer: Any) -> None:
    def intercept(request: httpx.Request) -> httpx.Response | None:
        if request.url.path == "/api/v1/executions/1":
            return answer() if callable(answer) else answer
        return None

    fake.intercept = intercept


def _one_with(version: Any) -> httpx.Response:
    item = {"id": "1", "status": "success", "workflowId": "wf-1", "startedAt": None}
    return httpx.Response(200, json={**item, "workflowVersionId": version})


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (lambda: _one_with(None), "n8n did not say which version it ran"),
        (lambda: _one_with(42), "n8n did not say which version it ran"),
        (lambda: _one_with("x" * 65), "n8n did not say which version it ran"),
        (lambda: _one_with("bad\nid"), "n8n did not say which version it ran"),
        (lambda: httpx.Response(404, json={"message": "Not Found"}), "n8n no longer has it"),
        (lambda: httpx.Response(200, text="<html>", headers={"content-type": "text/html"}), ""),
    ],
    ids=["missing", "number", "oversized", "control", "pruned", "not-json"],
)
def test_an_execution_version_n8n_does_not_say_holds_nothing_and_is_not_read_again(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock, answer: Any, note: str
) -> None:
    report = held_nothing(ledger, store, n8n, clock, lambda: _hostile_execution(n8n, answer))
    assert any(n.startswith("no workflow version for execution 1: " + note) for n in report.notes)
    reads = by_id_reads(n8n, "1")
    assert sync(ledger, n8n).ok and by_id_reads(n8n, "1") == reads


def test_an_execution_read_failing_with_5xx_is_left_for_the_next_run(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    republished_while_waiting(n8n, clock, ledger)
    clock.advance(seconds=30)
    _hostile_execution(n8n, httpx.Response(503, text="busy"))
    report = sync(ledger, n8n)
    assert report.ok and report.stale_versions == 0
    assert any(n.startswith("version reads stopped at execution 1") for n in report.notes)
    n8n.intercept = None
    assert sync(ledger, n8n).stale_versions == 1
    assert len(stale_holds(store)) == 1


def _hostile_workflow(fake: FakeN8n, change: Any) -> None:
    def intercept(request: httpx.Request) -> httpx.Response | None:
        if request.url.path != "/api/v1/workflows/wf-1":
            return None
        answer = fake.serve(request)
        body = answer.json()
        return change(body) or httpx.Response(200, json=body)

    fake.intercept = intercept


def _history(value: Any) -> Any:
    return lambda body: body["activeVersion"].update(workflowPublishHistory=value)


@pytest.mark.parametrize(
    "change",
    [
        _history(None),
        _history("activated"),
        _history({"versionId": NEW, "event": "activated", "createdAt": "2026-01-01T00:00:00Z"}),
        _history([{"versionId": NEW, "event": "activated", "createdAt": "yesterday"}]),
        _history([{"versionId": NEW, "event": "deactivated", "createdAt": "2026-01-01T00:00Z"}]),
        _history([7, None, "x", {"versionId": OLD, "event": "activated", "createdAt": None}]),
        _history([{}] * 1000 + [{"versionId": NEW, "event": "activated", "createdAt": "2026"}]),
        lambda body: body.update(activeVersionId=None),
        lambda body: body.update(activeVersionId=["x"]),
        lambda body: body.update(activeVersion="nope"),
        lambda body: httpx.Response(404, json={"message": "Not Found"}),
        lambda body: httpx.Response(403, json={"message": "Forbidden"}),
        lambda body: httpx.Response(200, text="[]"),
    ],
    ids=[
        "history-null", "history-text", "history-object", "bad-time", "deactivated-only",
        "garbage-entries", "past-the-first-1000", "no-active", "active-not-text",
        "active-version-not-object", "workflow-gone", "no-workflow-read-scope", "not-an-object",
    ],
)  # fmt: skip
def test_a_workflow_answer_that_does_not_tell_since_when_holds_nothing(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock, change: Any
) -> None:
    report = held_nothing(ledger, store, n8n, clock, lambda: _hostile_workflow(n8n, change))
    assert any(n.startswith(("no active version for workflow wf-1",)) for n in report.notes)


def test_a_huge_publish_history_is_read_within_its_bound(
    ledger: Ledger, store: Store, n8n: FakeN8n, clock: FakeClock
) -> None:
    republished_while_waiting(n8n, clock, ledger)
    clock.advance(seconds=30)
    noise = [{"versionId": NEW, "event": "deactivated", "createdAt": "2020-01-01T00:00:00Z"}]
    n8n.history["wf-1"] = n8n.history["wf-1"] + noise * 50_000
    report = sync(ledger, n8n)
    assert report.ok and report.stale_versions == 1
