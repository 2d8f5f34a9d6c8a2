"""The services on a fake of their port: the workflow calls and a person's decisions, decided
and recorded without a database (``tests/support/fakes/ledger.py``), in microseconds. What the
database adds (locks, the pipeline, the event chain) is tested once, against the databases, in
``tests/integration``."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

from flowledger.domain import FailOutcome, Reason
from flowledger.domain.causes import new_hold
from flowledger.domain.redact import secrets_of
from flowledger.services import port
from flowledger.services.ledger import DispatchInput, Ledger, NotFound
from flowledger.storage import holds, operations
from flowledger.storage.transaction import SqlTx
from tests.support.fakes.ledger import FakeTx, FakeUnitOfWork

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
WORKFLOW = "token:n8n"


@pytest.fixture
def unit() -> FakeUnitOfWork:
    return FakeUnitOfWork(lambda: NOW, secrets=secrets_of(["sk-live-0123456789"]))


@pytest.fixture
def ledger(unit: FakeUnitOfWork) -> Ledger:
    return Ledger(unit.store, unit=unit)


def req(execution_id: str, run_index: int = 0, n: int = 1) -> DispatchInput:
    return DispatchInput(
        processing_version="v1",
        execution_id=execution_id,
        run_index=run_index,
        input={"invoice": n},
        has_input=True,
        workflow_id="wf-1",
        step="send",
    )


def kinds(unit: FakeUnitOfWork) -> list[str]:
    return [e.kind for e in unit.events]


def test_a_first_dispatch_goes_with_its_intent_recorded(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    answer = ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)

    assert (answer.decision, answer.state, answer.attempt) == ("go", "dispatching", 1)
    op = unit.tables.operations["invoice:1:send"]
    assert (op["state"], op["execution_id"], op["version"]) == ("dispatching", "e1", 1)
    assert op["workflow_id"] == "wf-1"
    assert unit.tables.attempts["invoice:1:send", 1]["outcome"] == "dispatching"
    assert kinds(unit) == ["dispatched"]
    assert unit.events[0].actor == WORKFLOW
    assert unit.events[0].data["decision"] == "go"


def test_a_dispatch_from_another_execution_is_held_while_one_is_in_flight(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)

    answer = ledger.dispatch("invoice:1:send", req("e2")).run(WORKFLOW)

    assert (answer.decision, answer.reason) == ("hold", Reason.IN_FLIGHT.value)
    op = unit.tables.operations["invoice:1:send"]
    assert (op["execution_id"], op["attempt"], op["version"]) == ("e1", 1, 1)
    assert list(unit.tables.attempts) == [("invoice:1:send", 1)]
    # An answer only: nothing about the operation for a person to resolve. Two executions of
    # one workflow at once are a twin trigger, noted on a hold about the workflow.
    assert [(h["reason"], h["operation_id"]) for h in unit.tables.holds.values()] == [
        ("duplicate_trigger", None)
    ]
    assert kinds(unit) == ["dispatched", "dispatch_held", "hold_opened", "twin_trigger"]
    assert unit.events[1].data["in_flight"] == "e1"


def test_the_same_execution_sending_again_gets_the_same_go_and_writes_nothing(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    first = ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)
    again = ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)

    assert again == first
    assert unit.tables.operations["invoice:1:send"]["version"] == 1
    assert kinds(unit) == ["dispatched"]


def test_a_confirm_records_the_receipt_and_ends_the_attempt(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)

    answer = ledger.confirm("invoice:1:send", "R-1", execution_id="e1").run(WORKFLOW)

    assert (answer.state, answer.receipt, answer.reason) == ("confirmed", "R-1", None)
    op = unit.tables.operations["invoice:1:send"]
    assert (op["state"], op["receipt"], op["version"]) == ("confirmed", "R-1", 2)
    attempt = unit.tables.attempts["invoice:1:send", 1]
    assert (attempt["outcome"], attempt["ended_at"]) == ("confirmed", NOW)
    assert [(r["receipt"], r["kind"]) for r in unit.tables.receipts] == [("R-1", "workflow")]
    assert kinds(unit) == ["dispatched", "confirmed"]


def test_a_second_confirm_with_another_receipt_opens_a_receipt_conflict_hold(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)
    ledger.confirm("invoice:1:send", "R-1").run(WORKFLOW)

    answer = ledger.confirm("invoice:1:send", "R-2").run(WORKFLOW)

    assert (answer.state, answer.receipt) == ("confirmed", "R-1")  # the first one stands
    assert answer.reason == Reason.RECEIPT_CONFLICT.value
    (hold,) = unit.tables.holds.values()
    assert (hold["reason"], hold["blocking"], hold["operation_id"]) == (
        "receipt_conflict",
        True,
        "invoice:1:send",
    )
    assert answer.hold_ids == [hold["id"]]
    assert [(r["receipt"], r["kind"]) for r in unit.tables.receipts] == [
        ("R-1", "workflow"),
        ("R-2", "conflict"),
    ]
    assert kinds(unit) == ["dispatched", "confirmed", "hold_opened", "receipt_conflict"]
    # A blocking hold answers hold to the next dispatch, whoever sends it.
    held = ledger.dispatch("invoice:1:send", req("e9")).run(WORKFLOW)
    assert (held.decision, held.reason) == ("hold", "receipt_conflict")


def test_the_same_receipt_again_changes_nothing(ledger: Ledger, unit: FakeUnitOfWork) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)
    ledger.confirm("invoice:1:send", "R-1").run(WORKFLOW)
    recorded = (dict(unit.tables.operations), list(unit.tables.receipts), list(unit.events))

    answer = ledger.confirm("invoice:1:send", "R-1").run(WORKFLOW)

    assert (answer.state, answer.receipt, answer.reason) == ("confirmed", "R-1", None)
    assert (unit.tables.operations, unit.tables.receipts, unit.events) == recorded


def test_a_dispatch_that_lost_the_race_runs_again_and_is_held(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)
    ledger.fail("invoice:1:send", FailOutcome.REJECTED).run(WORKFLOW)  # failed: may go again
    # e3 claims the operation between e2's read of it and e2's compare-and-set.
    unit.meanwhile.append(lambda: ledger.dispatch("invoice:1:send", req("e3")).run(WORKFLOW))

    answer = ledger.dispatch("invoice:1:send", req("e2")).run(WORKFLOW)

    assert (answer.decision, answer.reason) == ("hold", Reason.IN_FLIGHT.value)
    op = unit.tables.operations["invoice:1:send"]
    assert (op["execution_id"], op["attempt"]) == ("e3", 2)
    assert kinds(unit) == [
        "dispatched", "failed",
        "dispatched", "hold_opened", "twin_trigger",  # e3, a twin of e1
        "dispatch_held", "hold_evidence", "twin_trigger",  # e2, a twin of e3
    ]  # fmt: skip
    assert unit.runs == unit.commits + 1  # e2's first run rolled back


def test_an_unknown_outcome_is_held_until_a_person_releases_it(
    ledger: Ledger, unit: FakeUnitOfWork
) -> None:
    ledger.dispatch("invoice:1:send", req("e1")).run(WORKFLOW)
    failed = ledger.fail("invoice:1:send", FailOutcome.UNKNOWN, "timeout").run(WORKFLOW)
    (hold_id,) = failed.hold_ids
    assert unit.tables.operations["invoice:1:send"]["state"] == "dispatching"
    assert ledger.dispatch("invoice:1:send", req("e2")).run(WORKFLOW).decision == "hold"

    ledger.resolve(hold_id, "release", note="the target has no invoice 1", operator="ana").run()

    hold = unit.tables.holds[hold_id]
    assert (hold["resolution"], hold["resolved_by"]) == ("released_for_retry", "operator:ana")
    assert unit.tables.attempts["invoice:1:send", 1]["outcome"] == "released"
    answer = ledger.dispatch("invoice:1:send", req("e2")).run(WORKFLOW)
    assert (answer.decision, answer.attempt) == ("go", 2)


def test_a_hold_is_opened_with_its_detail_redacted(ledger: Ledger, unit: FakeUnitOfWork) -> None:
    hold = new_hold(
        Reason.EXECUTION_STUCK,
        "stuck calling https://x/?key=sk-live-0123456789",
        source="prod-n8n",
        execution_id="e1",
    )

    hold_id = ledger.open_hold(hold, execution_id="e1", source="prod-n8n").run("sweep")

    assert hold_id is not None
    detail = unit.tables.holds[hold_id]["detail"]
    assert "sk-live-0123456789" not in detail
    assert unit.events[-1].data["detail"] == detail
    assert (
        ledger.open_hold(hold, execution_id="e1", source="prod-n8n").run("sweep") is None
    )  # once per cause


def test_a_refused_call_leaves_nothing(ledger: Ledger, unit: FakeUnitOfWork) -> None:
    with pytest.raises(NotFound):
        ledger.confirm("invoice:404:send", "R-1").run(WORKFLOW)

    assert unit.tables.operations == {} and unit.tables.receipts == []
    assert unit.events == [] and unit.commits == 0


PORT_METHODS = sorted(
    name
    for cls in (port.Operations, port.Holds, port.Tx)
    for name, value in vars(cls).items()
    if callable(value) and not name.startswith("_")
)


@pytest.mark.parametrize("name", PORT_METHODS)
def test_the_fake_and_the_database_take_what_the_port_declares(name: str) -> None:
    declared = _parameters(getattr(port.Tx, name))
    assert _parameters(getattr(FakeTx, name)) == declared
    assert _parameters(getattr(SqlTx, name)) == declared


def test_the_database_s_methods_are_the_repositories_functions_themselves() -> None:
    # No wrapper between a work and its statement: the hot path pays no call of its own.
    assert SqlTx.save_operation is operations.save_operation
    assert SqlTx.close_hold is holds.close_hold


def _parameters(method: Any) -> list[tuple[str, Any, Any]]:
    """A method's parameters after the transaction itself, by name, kind and default."""
    found = list(inspect.signature(method).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in found]
