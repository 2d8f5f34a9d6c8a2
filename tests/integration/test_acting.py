"""Acting back on n8n: a hold's execution pinned from a queue written with the hold, a retry
asked with a release and made once, whatever n8n answers (on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.config import SourceConfig
from flowledger.domain import FailOutcome, IllegalTransition, NewHold, Reason, State
from flowledger.scheduled.acting import Acting, delete_pinned
from flowledger.services import actions
from flowledger.services.ledger import Ledger
from flowledger.storage import acting
from flowledger.storage.acting_models import EvidencePin, RetryRequest
from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Execution, table
from tests.support.builders import FakeClock, execution_row, req
from tests.support.fakes.n8n_actions import KEY, FakeN8n

PINS, RETRIES, EVENTS, EXECUTIONS = (
    table(EvidencePin), table(RetryRequest), table(Event), table(Execution)
)  # fmt: skip
OP = "invoice:INV-42:send"
SOURCE = "prod-n8n"


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv("TEST_N8N_KEY", KEY)
    fake = FakeN8n()
    fake.add("11", "error")
    return fake


def source(**kw: Any) -> SourceConfig:
    return SourceConfig(
        name=SOURCE, kind="n8n", base_url="http://n8n.test", api_key_env="TEST_N8N_KEY", **kw
    )


def acting_on(ledger: Ledger, n8n: FakeN8n, **kw: Any) -> Acting:
    def client(_src: SourceConfig) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(n8n.handle))

    return Acting(ledger, [source(**kw)], client_for=client)


@pytest.fixture
def pinning(store: Store, clock: FakeClock) -> Ledger:
    return Ledger(store, clock=clock, pin_sources=[SOURCE])


def rows(store: Store, tbl: sa.Table) -> list[Any]:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(tbl).order_by(tbl.c.id)).all()


def events(store: Store, kind: str) -> list[dict[str, Any]]:
    with store.reader.connect() as conn:
        found = conn.execute(sa.select(EVENTS.c.data).where(EVENTS.c.kind == kind)).scalars()
        return [json.loads(d) for d in found]


def failed_hold(ledger: Ledger, execution_id: str = "11") -> int:
    """An operation dispatched by ``execution_id``, which then failed: its execution_failed
    hold."""
    ledger.dispatch(OP, req(execution_id)).run("wf")
    ((_op, hold_id),) = ledger.execution_failed(execution_id, "the node failed").run("hook")
    assert hold_id is not None
    return hold_id


# ---------------------------------------------------------------------- the pin queue


def test_a_hold_about_an_execution_queues_its_pin_in_its_own_transaction(
    store: Store, pinning: Ledger
) -> None:
    pinning.dispatch(OP, req("11")).run("wf")
    assert rows(store, PINS) == []
    answer = pinning.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    (pin,) = rows(store, PINS)
    assert (pin.hold_id, pin.execution_id, pin.source, pin.pinned_at) == (
        answer.hold_ids[0], "11", None, None,
    )  # fmt: skip


def test_nothing_is_queued_when_no_source_pins_or_the_hold_names_another(
    store: Store, clock: FakeClock
) -> None:
    Ledger(store, clock=clock).dispatch(OP, req("11")).run("wf")
    Ledger(store, clock=clock).fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    other = Ledger(store, clock=clock, pin_sources=[SOURCE])
    other.dispatch("op-2", req("12")).run("wf")
    stuck = NewHold.of(Reason.EXECUTION_STUCK, "stuck:airflow:12", "running for 3 h")
    other.open_hold(stuck, operation_id="op-2", execution_id="12", source="airflow").run("s")
    # A hold about no execution (source_stale) queues nothing either.
    stale = NewHold.of(Reason.SOURCE_STALE, f"stale:{SOURCE}", "not synced")
    other.open_hold(stale, source=SOURCE).run("s")
    assert rows(store, PINS) == []


def test_the_pin_is_made_once_and_is_an_event(store: Store, pinning: Ledger, n8n: FakeN8n) -> None:
    hold_id = failed_hold(pinning)
    done = acting_on(pinning, n8n).run()
    assert (done.pinned, done.pins_waiting) == (1, 0)
    assert n8n.pinned == {"11": []}  # an annotation without a tag
    (pin,) = rows(store, PINS)
    assert pin.pinned_at is not None and pin.source == SOURCE
    assert events(store, "execution_pinned") == [{"source": SOURCE, "execution_id": "11"}]
    acting_on(pinning, n8n).run()
    assert [c for c in n8n.calls if c[0] == "PUT"] == [("PUT", "/executions/11/tags")]
    assert hold_id == pin.hold_id


def test_the_pin_carries_the_configured_tag_or_is_made_without_an_unknown_one(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    failed_hold(pinning)
    acting_on(pinning, n8n, pin_tag_id="nope").run()
    assert n8n.pinned == {"11": ["nope"]}  # n8n refused the tag, the annotation is made
    (event,) = events(store, "execution_pinned")
    assert "knows no annotation tag 'nope'" in event["note"]
    n8n.tags.add("kept")
    pinning.dispatch("op-2", req("12")).run("wf")
    n8n.add("12", "error")
    pinning.execution_failed("12", "boom").run("hook")
    acting_on(pinning, n8n, pin_tag_id="kept").run()
    assert events(store, "execution_pinned")[-1]["tag_id"] == "kept"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((403, {"message": "Forbidden"}), "lacks the executionTags:update scope"),
        ((500, {"message": "db locked"}), "failed with 500"),
        ((502, "<html>bad gateway</html>"), "502"),
        ((200, "<html>a proxy page</html>"), "not JSON"),
        (httpx.ReadTimeout("slow"), "did not answer in time"),
        (httpx.ConnectError("refused"), "cannot reach n8n"),
        ((200, {"pad": "x" * 2_000_000}), "over the 1,048,576-byte limit"),
    ],
)
def test_a_pin_n8n_does_not_make_is_tried_again_later_and_never_touches_the_hold(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock, answer: Any, said: str
) -> None:
    hold_id = failed_hold(pinning)
    n8n.answers["PUT /executions/11/tags"].append(answer)
    done = acting_on(pinning, n8n).run()
    assert (done.pinned, done.pins_waiting) == (0, 1)
    (pin,) = rows(store, PINS)
    assert pin.pinned_at is None and pin.attempts == 1 and said in pin.last_error
    assert pin.next_attempt_at == clock() + timedelta(seconds=5)
    assert KEY not in pin.last_error
    assert acting_on(pinning, n8n).run().pins_waiting == 0  # not due yet: n8n not asked
    with store.reader.connect() as conn:
        (hold,) = conn.execute(sa.text(f"SELECT resolved_at FROM holds WHERE id = {hold_id}"))
    assert hold.resolved_at is None
    clock.advance(seconds=5)
    assert acting_on(pinning, n8n).run().pinned == 1


def test_the_backoff_doubles_up_to_its_cap(store: Store, pinning: Ledger, n8n: FakeN8n,
                                            clock: FakeClock) -> None:  # fmt: skip
    failed_hold(pinning)
    waits = []
    for _ in range(12):
        n8n.answers["PUT /executions/11/tags"].append((503, {"message": "down"}))
        acting_on(pinning, n8n).run()
        (pin,) = rows(store, PINS)
        waits.append(pin.next_attempt_at - clock())
        clock.advance(seconds=(pin.next_attempt_at - clock()).total_seconds())
    assert waits[:4] == [timedelta(seconds=s) for s in (5, 10, 20, 40)]
    assert waits[-1] == timedelta(minutes=30)


def test_a_hold_resolved_before_its_pin_drops_the_pin(pinning: Ledger, n8n: FakeN8n) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "cancel", note="not needed", operator="ana").run()
    assert acting_on(pinning, n8n).run().pinned == 0
    assert n8n.pinned == {}


def test_a_pin_of_a_hold_naming_no_source_finds_its_source_by_the_kept_copy(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    failed_hold(pinning)
    other = source().model_copy(update={"name": "other-n8n"})
    client = httpx.Client(transport=httpx.MockTransport(n8n.handle))
    two = Acting(pinning, [source(), other], client_for=lambda _s: client)
    assert two.run().pins_waiting == 1  # no copy yet: which n8n is unknown
    (pin,) = rows(store, PINS)
    assert "no configured n8n source has a copy of execution 11" in pin.last_error
    with store.engine.begin() as conn:
        conn.execute(EXECUTIONS.insert(), [execution_row("11", "error", source="other-n8n")])
        conn.execute(PINS.update().values(next_attempt_at=pin.created_at))
    assert two.run().pinned == 1
    assert rows(store, PINS)[0].source == "other-n8n"


# ---------------------------------------------------------------------- retries


def test_release_with_retry_records_one_retry_asked_and_n8n_is_called_once(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="target has no record", operator="ana",
                    retry=True).run()  # fmt: skip
    (asked,) = rows(store, RETRIES)
    assert (asked.execution_id, asked.asked_by, asked.done_at) == ("11", "operator:ana", None)
    assert events(store, "retry_asked") == [{"execution_id": "11", "source": None}]
    outcome = acting_on(pinning, n8n).retry_hold(hold_id)
    assert outcome is not None and outcome.outcome == "retried"
    assert outcome.new_execution_id == "12"
    (retried,) = events(store, "execution_retried")
    assert retried["new_execution_id"] == "12" and retried["execution_id"] == "11"
    acting_on(pinning, n8n).run()
    again = acting_on(pinning, n8n).retry_hold(hold_id)
    assert again is not None and "retried already as execution 12" in again.line
    assert n8n.posts("/retry") == 1
    # The next dispatch, from the new execution, goes ahead.
    assert pinning.dispatch(OP, req("12")).run("wf").decision == "go"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((409, {"message": "The execution succeeded, so it cannot be retried."}),
         "(409): The execution succeeded, so it cannot be retried."),
        ((409, {"message": "The execution was aborted before starting, so it cannot be retried"}),
         "aborted before starting"),
        ((404, {"message": "The execution with the ID \"11\" does not exist."}),
         "no execution 11 (404): pruned or deleted"),
        ((403, {"message": "Forbidden"}), "lacks the execution:retry scope (403)"),
    ],
)  # fmt: skip
def test_n8n_refusing_the_retry_leaves_the_release_standing_with_its_reason(
    store: Store, pinning: Ledger, n8n: FakeN8n, answer: Any, said: str
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    n8n.answers["POST /executions/11/retry"].append(answer)
    outcome = acting_on(pinning, n8n).retry_hold(hold_id)
    assert outcome is not None and outcome.outcome == "refused" and said in outcome.line
    assert "\n" not in outcome.line
    (row,) = rows(store, RETRIES)
    assert row.outcome == "refused" and said in row.last_error
    assert events(store, "retry_refused")[0]["reason"] == outcome.line
    assert pinning.dispatch(OP, req("13")).run("wf").decision == "go"  # released
    assert acting_on(pinning, n8n).run().refused == 0  # done: never asked again


@pytest.mark.parametrize(
    "lost",
    [
        (500, {"message": "oops"}),
        httpx.ReadTimeout("no answer"),
        (200, {"status": "success"}),  # malformed: no id
        (200, "<html>proxy</html>"),
        httpx.RemoteProtocolError("connection closed mid-answer"),
    ],
)
def test_a_retry_whose_answer_is_lost_is_looked_up_before_it_is_ever_made_again(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock, lost: Any
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    if isinstance(lost, Exception):
        n8n.answers["POST /executions/11/retry"].append(n8n.retry_then_lose_the_answer("11", lost))
    else:
        n8n.answers["POST /executions/11/retry"].append(lost)
    first = acting_on(pinning, n8n).retry_hold(hold_id)
    assert first is not None and first.outcome == "waiting"
    (row,) = rows(store, RETRIES)
    assert row.called_at is not None and row.done_at is None
    clock.advance(minutes=5)
    done = acting_on(pinning, n8n).run()
    if isinstance(lost, Exception):  # n8n made it: found, not made twice
        assert (done.retried, n8n.posts("/retry")) == (1, 1)
        assert events(store, "execution_retried")[0]["note"].startswith("found in n8n")
    else:  # n8n never made one: made now, once
        assert (done.retried, n8n.posts("/retry")) == (1, 2)
    assert sum(1 for e in n8n.executions.values() if e.get("retryOf") == "11") == 1


def test_a_retry_that_never_reached_n8n_is_made_later_without_a_lookup(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    n8n.answers["POST /executions/11/retry"].append(httpx.ConnectError("refused"))
    assert acting_on(pinning, n8n).run().retries_waiting == 1
    (row,) = rows(store, RETRIES)
    assert row.called_at is None and "cannot reach n8n" in row.last_error
    clock.advance(seconds=5)
    assert acting_on(pinning, n8n).run().retried == 1
    assert ("GET", "/executions") not in n8n.calls


def test_a_retry_being_made_elsewhere_is_not_made_again(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    (row,) = rows(store, RETRIES)
    with store.engine.begin() as conn:  # another process claimed it and is calling n8n
        later = row.asked_at + timedelta(minutes=2)
        assert acting.claim_retry(conn, row.id, row.asked_at, None, later)
    outcome = acting_on(pinning, n8n).retry_hold(hold_id)
    assert outcome is not None and outcome.outcome == "waiting"
    assert acting_on(pinning, n8n).run().retried == 0
    assert n8n.posts("/retry") == 0


def test_a_retry_asked_for_another_tool_is_refused_not_left_waiting(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    pinning.dispatch(OP, req("run-1")).run("wf")
    failed = NewHold.of(Reason.EXECUTION_FAILED, "failed:run-1", "the DAG run failed")
    hold_id = pinning.open_hold(
        failed, operation_id=OP, execution_id="run-1", source="prod-airflow"
    ).run("sweep")
    assert hold_id is not None
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    airflow = SourceConfig(name="prod-airflow", kind="airflow", base_url="http://af.test")
    client = httpx.Client(transport=httpx.MockTransport(n8n.handle))
    outcome = Acting(pinning, [source(), airflow], client_for=lambda _s: client).retry_hold(hold_id)
    assert outcome is not None and outcome.outcome == "refused"
    assert outcome.line == (
        "source prod-airflow is of kind airflow: the ledger retries and pins n8n executions only"
    )
    assert n8n.calls == []


def test_retry_is_refused_for_a_hold_with_no_execution_and_goes_with_release_only(
    pinning: Ledger,
) -> None:
    pinning.dispatch(OP, req("11")).run("wf")
    hold = NewHold.of(Reason.UNKNOWN_OUTCOME, "by-hand:1", "a person opened it")
    hold_id = pinning.open_hold(hold, operation_id=OP).run("ana")  # about no execution
    assert hold_id is not None
    with pytest.raises(IllegalTransition, match="names no execution to retry"):
        pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    with pytest.raises(Exception, match="only a release can ask for a retry"):
        pinning.resolve(hold_id, "cancel", note="n", operator="ana", retry=True).run()


@pytest.mark.parametrize(
    ("reason", "status", "offered"),
    [
        ("execution_failed", None, True),
        ("unknown_outcome", "crashed", True),
        ("unknown_outcome", "error", True),
        ("unknown_outcome", "success", False),
        ("unknown_outcome", None, False),
        ("receipt_conflict", "running", False),
    ],
)
def test_retry_is_offered_only_for_an_execution_known_to_have_failed(
    reason: str, status: str | None, offered: bool
) -> None:
    hold = {"id": 1, "reason": reason, "execution_id": "11", "operation_id": OP}
    assert (actions.why_no_retry(hold, status) is None) is offered
    assert actions.why_no_retry({**hold, "execution_id": None}, status) is not None


# ---------------------------------------------------------------------- after the holds


def test_pinned_executions_of_resolved_holds_are_listed_and_deleted_only_when_asked(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    hold_id = failed_hold(pinning)
    acting_on(pinning, n8n).run()
    with store.reader.connect() as conn:
        assert acting.pinned_after_holds(conn) == []  # its hold is open
    pinning.resolve(hold_id, "cancel", note="done", operator="ana").run()
    with store.reader.connect() as conn:
        (listed,) = acting.pinned_after_holds(conn)
    assert (listed["source"], listed["execution_id"], listed["holds"]) == (SOURCE, "11", 1)
    assert "11" in n8n.executions  # never deleted on its own
    client = httpx.Client(transport=httpx.MockTransport(n8n.handle))
    said = delete_pinned(pinning, source(), ["11"], "ana", client)
    assert said == [("11", "deleted")] and "11" not in n8n.executions
    assert events(store, "execution_deleted") == [
        {"source": SOURCE, "execution_id": "11", "existed": True}
    ]
    with store.reader.connect() as conn:  # with the operation and hold, for `show`
        deleted = conn.execute(
            sa.select(EVENTS.c.operation_id, EVENTS.c.hold_id).where(
                EVENTS.c.kind == "execution_deleted"
            )
        ).one()
    assert tuple(deleted) == (OP, hold_id)
    with store.reader.connect() as conn:
        assert acting.pinned_after_holds(conn) == []


def test_missing_scopes_are_named_and_nothing_changes(n8n: FakeN8n) -> None:
    from flowledger.connectors.n8n_actions import N8nActions
    from flowledger.sync.connect import connector_settings

    n8n.scopes = {"execution:retry"}
    client = httpx.Client(transport=httpx.MockTransport(n8n.handle))
    missing = N8nActions(client, connector_settings(source())).missing_scopes()
    assert missing == ["executionTags:update", "execution:delete"]
    assert n8n.pinned == {} and set(n8n.executions) == {"11"}


def test_the_operation_stays_prepared_after_a_refused_retry(pinning: Ledger, n8n: FakeN8n) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    n8n.answers["POST /executions/11/retry"].append((409, {"message": "queued"}))
    acting_on(pinning, n8n).run()
    with pinning.store.reader.connect() as conn:
        state = conn.execute(sa.text("SELECT state FROM operations")).scalar_one()
    assert state == State.PREPARED.value


def test_the_handover_shows_the_retries_and_the_executions_pinned_for_resolved_holds(
    pinning: Ledger, n8n: FakeN8n, clock: FakeClock
) -> None:
    from flowledger.reports import handover

    since = clock()
    hold_id = failed_hold(pinning)
    acting_on(pinning, n8n).run()  # pinned
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    acting_on(pinning, n8n).run()  # retried as 12
    report = handover.build(pinning.store, handover.Shift(since, clock() + timedelta(hours=1)))
    assert "## Retries asked in n8n" in report
    assert f"| {hold_id} | {OP} | 11 | operator:ana | 12 |" in report
    assert "## Pinned in n8n for resolved holds" in report
    assert "| prod-n8n | 11 |" in report
    assert "flowledger sources delete-pinned SOURCE" in report


@pytest.mark.parametrize("tag", ["", "has space", "x" * 65, "tag/../.."])
def test_a_pin_tag_id_n8n_could_not_take_is_refused_with_the_setting_named(tag: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="pin_tag_id"):
        source(pin_tag_id=tag)


# ---------------------------------------------------------------------- n8n starting

STARTING_404 = "<!DOCTYPE html><html><body><pre>Cannot {} /api/v1/executions/11{}</pre></body>"


def test_a_page_404_while_n8n_starts_keeps_the_pin_for_later(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock
) -> None:
    failed_hold(pinning)
    n8n.answers["PUT /executions/11/tags"].append((404, STARTING_404.format("PUT", "/tags")))
    assert acting_on(pinning, n8n).run().pins_waiting == 1
    (pin,) = rows(store, PINS)
    assert pin.pinned_at is None and "still starting" in pin.last_error
    assert "pruned" not in pin.last_error and "\n" not in pin.last_error
    clock.advance(minutes=5)
    assert acting_on(pinning, n8n).run().pinned == 1


@pytest.mark.parametrize("route", ["POST /executions/11/retry", "GET /executions"])
def test_a_page_404_while_n8n_starts_keeps_the_retry_for_later(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock, route: str
) -> None:
    hold_id = failed_hold(pinning)
    pinning.resolve(hold_id, "release", note="n", operator="ana", retry=True).run()
    if route.startswith("GET"):  # the lookup of an unfinished call
        n8n.answers["POST /executions/11/retry"].append(httpx.ReadTimeout("lost"))
        assert acting_on(pinning, n8n).retry_hold(hold_id).outcome == "waiting"  # type: ignore[union-attr]
        clock.advance(minutes=5)
    n8n.answers[route].append((404, STARTING_404.format(route.split()[0], "/retry")))
    outcome = acting_on(pinning, n8n).retry_hold(hold_id)
    assert outcome is not None and outcome.outcome == "waiting"
    assert "still starting" in outcome.line and "pruned" not in outcome.line
    assert events(store, "retry_refused") == []
    clock.advance(minutes=5)
    assert acting_on(pinning, n8n).run().retried == 1


def test_a_page_404_while_n8n_starts_deletes_nothing_and_records_nothing(
    store: Store, pinning: Ledger, n8n: FakeN8n
) -> None:
    hold_id = failed_hold(pinning)
    acting_on(pinning, n8n).run()
    pinning.resolve(hold_id, "cancel", note="done", operator="ana").run()
    n8n.answers["DELETE /executions/11"].append((404, STARTING_404.format("DELETE", "")))
    client = httpx.Client(transport=httpx.MockTransport(n8n.handle))
    ((_, said),) = delete_pinned(pinning, source(), ["11"], "ana", client)
    assert said.startswith("not deleted:") and "still starting" in said
    assert events(store, "execution_deleted") == []
    with store.reader.connect() as conn:
        assert len(acting.pinned_after_holds(conn)) == 1  # still to delete
    # n8n's own JSON 404 is an execution gone already.
    n8n.answers["DELETE /executions/11"].append((404, {"message": "Not Found"}))
    assert delete_pinned(pinning, source(), ["11"], "ana", client) == [("11", "was gone already")]


# ---------------------------------------------------------------------- what waits, shown


def test_what_waits_is_counted_by_kind_and_source_with_its_newest_error_and_logged_once(
    store: Store, pinning: Ledger, n8n: FakeN8n, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    n8n.scopes = {"execution:retry", "execution:delete"}
    n8n.add("12", "error")
    first = failed_hold(pinning, "11")
    pinning.dispatch("op-2", req("12")).run("wf")
    ((_op, second),) = pinning.execution_failed("12", "the node failed").run("hook")
    assert second is not None
    pinning.resolve(first, "release", note="n", operator="ana", retry=True).run()
    n8n.answers["POST /executions/11/retry"].append(httpx.ConnectError("refused"))
    with caplog.at_level("WARNING", logger="flowledger.scheduled.acting"):
        for _ in range(3):  # every tick fails the same way: one line each
            acting_on(pinning, n8n).run()
            clock.advance(hours=1)
            n8n.answers["POST /executions/11/retry"].append(httpx.ConnectError("refused"))
    lines = [r.getMessage() for r in caplog.records]
    assert sum("pin of execution 12" in line for line in lines) == 1
    assert sum("retry of execution 11" in line for line in lines) == 1
    with store.reader.connect() as conn:
        found = acting.waiting(conn)
    assert [(w["what"], w["source"], w["count"], w["scope"]) for w in found] == [
        ("pin", SOURCE, 1, True),
        ("retry", SOURCE, 1, False),
    ]  # fmt: skip  (the pin of the released hold waits no more)
    assert "executionTags:update scope (403)" in found[0]["last_error"]
    assert "cannot reach n8n" in found[1]["last_error"]
    assert found[0]["since"] < clock()
    pinning.resolve(second, "cancel", note="n", operator="ana").run()
    with store.reader.connect() as conn:
        assert [w["what"] for w in acting.waiting(conn)] == ["retry"]
