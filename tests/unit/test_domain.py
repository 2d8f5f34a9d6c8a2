"""The state machine, table-driven: every state x every action -> the documented result."""

from __future__ import annotations

from datetime import timedelta

import pytest

from flowledger import domain
from flowledger.domain import Approval, Decision, FailOutcome, OpenHold, Reason, State
from tests.support.builders import T0, dreq, op

NOW = T0 + timedelta(minutes=1)
OTHER_HASH = "sha256:" + "b" * 64


def unknown_hold() -> OpenHold:
    return OpenHold(7, Reason.UNKNOWN_OUTCOME, True, "unknown_outcome:x:1")


def outcome(state: State, action: str) -> str:
    """Run ``action`` against an operation in ``state`` and describe the result in one word."""
    o = op(state)
    try:
        if action.startswith("dispatch"):
            variants = {
                "dispatch": dreq("exec-2"),
                "dispatch_replay": dreq("exec-1"),
                "dispatch_other_run": dreq("exec-1", run_index=1),
                "dispatch_input": dreq("exec-2", input_hash=OTHER_HASH),
                "dispatch_version": dreq("exec-2", processing_version="v2"),
                "dispatch_expired": dreq("exec-2", approval=Approval("v1", T0)),
                "dispatch_approval_v": dreq("exec-2", approval=Approval("v0", None)),
            }
            change = domain.dispatch(o, variants[action], [], NOW, operation_id=o.operation_id)
            assert change.decision is not None
            word = change.decision.value
            if change.reason is not None:
                word += f":{change.reason.value}"
            if change.operation is not None:
                word += f"->{change.operation.state.value}#{change.operation.attempt}"
            return word
        if action == "confirm_same":
            change = domain.confirm(o, o.receipt or "R-1", [])
        elif action == "confirm_other":
            change = domain.confirm(o, "R-2", [])
        elif action == "fail_rejected":
            change = domain.fail(o, FailOutcome.REJECTED, "422")
        elif action == "fail_unknown":
            change = domain.fail(o, FailOutcome.UNKNOWN, "timeout")
        elif action == "release":
            change = domain.release_for_retry(o, unknown_hold(), [unknown_hold()], "not in CRM")
        elif action == "evidence":
            change = domain.confirm_with_evidence(
                o, unknown_hold(), [unknown_hold()], "R-9", "seen in CRM"
            )
        elif action == "cancel":
            change = domain.cancel(o, [unknown_hold()], "customer withdrew")
        else:
            raise AssertionError(action)
    except domain.IllegalTransition:
        return "illegal"
    parts = []
    if change.operation is not None:
        parts.append(f"->{change.operation.state.value}")
    parts += [f"hold:{h.reason.value}" for h in change.holds]
    return " ".join(parts) or "noop"


P, D, C, F, X = (State.PREPARED, State.DISPATCHING, State.CONFIRMED, State.FAILED, State.CANCELLED)
MATRIX = [
    # state, action, expected
    (P, "dispatch", "go->dispatching#1"),
    (D, "dispatch", "hold:in_flight"),
    (D, "dispatch_replay", "go"),
    (D, "dispatch_other_run", "hold:in_flight"),
    (C, "dispatch", "skip"),
    (C, "dispatch_replay", "skip"),
    (F, "dispatch", "go->dispatching#2"),
    (X, "dispatch", "hold:cancelled"),
    (P, "dispatch_input", "hold:input_mismatch"),
    (D, "dispatch_input", "hold:input_mismatch"),
    (C, "dispatch_input", "hold:input_mismatch"),
    (F, "dispatch_input", "hold:input_mismatch"),
    (P, "dispatch_version", "hold:version_mismatch"),
    (C, "dispatch_version", "hold:version_mismatch"),
    (P, "dispatch_expired", "hold:approval_expired"),
    (F, "dispatch_expired", "hold:approval_expired"),
    (P, "dispatch_approval_v", "hold:approval_version_mismatch"),
    (P, "confirm_same", "illegal"),
    (D, "confirm_same", "->confirmed"),
    (C, "confirm_same", "noop"),
    (C, "confirm_other", "hold:receipt_conflict"),
    (F, "confirm_other", "hold:receipt_conflict"),
    (X, "confirm_other", "hold:receipt_conflict"),
    (P, "fail_rejected", "illegal"),
    (D, "fail_rejected", "->failed"),
    (D, "fail_unknown", "hold:unknown_outcome"),
    (C, "fail_rejected", "illegal"),
    (F, "fail_unknown", "illegal"),
    (X, "fail_unknown", "illegal"),
    (D, "release", "->prepared"),
    (P, "release", "illegal"),
    (C, "release", "illegal"),
    (D, "evidence", "->confirmed"),
    (C, "evidence", "illegal"),
    (P, "evidence", "illegal"),
    (P, "cancel", "->cancelled"),
    (D, "cancel", "->cancelled"),
    (F, "cancel", "->cancelled"),
    (C, "cancel", "illegal"),
    (X, "cancel", "illegal"),
    (X, "dispatch_input", "hold:input_mismatch"),
    (P, "confirm_other", "illegal"),
    (D, "confirm_other", "->confirmed"),
    (P, "fail_unknown", "illegal"),
    (C, "fail_unknown", "illegal"),
]


@pytest.mark.parametrize(
    ("state", "action", "expected"), MATRIX, ids=[f"{s.value}-{a}" for s, a, _ in MATRIX]
)
def test_transition_matrix(state: State, action: str, expected: str) -> None:
    assert outcome(state, action) == expected


def test_every_state_meets_every_workflow_action() -> None:
    covered = {(s, a) for s, a, _ in MATRIX}
    for state in State:
        for action in ("dispatch", "dispatch_input", "confirm_other", "fail_unknown", "cancel"):
            assert (state, action) in covered


def test_new_operation_is_claimed_with_attempt_one() -> None:
    change = domain.dispatch(None, dreq(), [], NOW, operation_id="op-1")
    assert change.decision is Decision.GO
    assert change.operation is not None
    assert (change.operation.state, change.operation.attempt) == (State.DISPATCHING, 1)
    assert change.operation.deadline == NOW + domain.DEFAULT_DISPATCH_DEADLINE


def test_new_operation_with_expired_approval_is_recorded_but_held() -> None:
    change = domain.dispatch(None, dreq(approval=Approval("v1", T0)), [], NOW, operation_id="op-1")
    assert change.decision is Decision.HOLD
    assert change.operation is not None and change.operation.state is State.PREPARED


def test_approval_still_valid_is_accepted() -> None:
    change = domain.dispatch(
        None, dreq(approval=Approval("v1", NOW + timedelta(hours=1))), [], NOW, operation_id="op-1"
    )
    assert change.decision is Decision.GO


def test_dispatch_with_open_blocking_hold_is_held_even_for_confirmed() -> None:
    conflict = OpenHold(3, Reason.RECEIPT_CONFLICT, True, "k")
    change = domain.dispatch(op(C), dreq(), [conflict], NOW, operation_id="x")
    assert (change.decision, change.reason) == (Decision.HOLD, Reason.RECEIPT_CONFLICT)


def test_dispatch_while_unknown_outcome_is_held_even_for_the_same_execution() -> None:
    change = domain.dispatch(op(D), dreq("exec-1"), [unknown_hold()], NOW, operation_id="x")
    assert (change.decision, change.reason) == (Decision.HOLD, Reason.UNKNOWN_OUTCOME)


def test_non_blocking_hold_does_not_stop_a_dispatch() -> None:
    stale = OpenHold(4, Reason.STALE_PREPARED, False, "k")
    assert domain.dispatch(op(P), dreq(), [stale], NOW, operation_id="x").decision is Decision.GO


def test_failed_operation_at_max_attempts_is_held() -> None:
    change = domain.dispatch(
        op(F, attempt=3, max_attempts=3), dreq("exec-9"), [], NOW, operation_id="x"
    )
    assert (change.decision, change.reason) == (Decision.HOLD, Reason.MAX_ATTEMPTS)


def test_confirm_with_the_same_receipt_twice_is_a_noop() -> None:
    change = domain.confirm(op(C, receipt="R-1"), "R-1", [])
    assert change.operation is None and change.holds == () and change.event is None


def test_late_confirm_resolves_the_unknown_outcome_hold() -> None:
    change = domain.confirm(op(D), "R-1", [unknown_hold()])
    assert change.resolve_holds == (7,)
    assert change.resolution is domain.Resolution.CONFIRMED_BY_RECEIPT


def test_receipt_conflict_resolved_with_evidence_keeps_the_named_receipt() -> None:
    conflict = OpenHold(3, Reason.RECEIPT_CONFLICT, True, "k")
    change = domain.confirm_with_evidence(
        op(C, receipt="R-1"), conflict, [conflict], "R-2", "R-1 was voided in the CRM"
    )
    assert change.operation is not None and change.operation.receipt == "R-2"


@pytest.mark.parametrize("note", ["", "   "])
def test_every_resolution_needs_a_note(note: str) -> None:
    with pytest.raises(domain.IllegalTransition):
        domain.release_for_retry(op(D), unknown_hold(), [unknown_hold()], note)
    with pytest.raises(domain.IllegalTransition):
        domain.cancel(op(D), [], note)
    with pytest.raises(domain.IllegalTransition):
        domain.confirm_with_evidence(op(D), unknown_hold(), [], "R", note)


def test_blocking_hold_cannot_be_dismissed() -> None:
    with pytest.raises(domain.IllegalTransition):
        domain.dismiss(unknown_hold(), "seen")


def test_released_operation_dispatches_as_the_next_attempt() -> None:
    released = domain.release_for_retry(op(D), unknown_hold(), [unknown_hold()], "not sent")
    assert released.operation is not None
    again = domain.dispatch(released.operation, dreq("exec-3"), [], NOW, operation_id="x")
    assert again.decision is Decision.GO
    assert again.operation is not None and again.operation.attempt == 2


def test_a_deadline_is_missed_from_its_very_instant_on() -> None:
    deadline = T0 + timedelta(minutes=15)
    assert not domain.is_overdue(deadline, deadline - timedelta(microseconds=1))
    assert domain.is_overdue(deadline, deadline)
    assert domain.is_overdue(deadline, deadline + timedelta(hours=1))
