"""The workflow's moves pinned to whole values: every ``Change`` field, the exact cause key,
the exact event name and payload, and the exact refusal (code and message)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowledger.domain import (
    Approval,
    Change,
    Decision,
    DispatchRequest,
    FailOutcome,
    IllegalTransition,
    NewHold,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
    confirm,
    dispatch,
    execution_failed_hold,
    fail,
    prepare,
    unknown_outcome_hold,
)

OP_ID = "invoice:INV-42:send"
HASH = "sha256:" + "a" * 64
OTHER_HASH = "sha256:" + "b" * 64
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=1)
NOW_TEXT = "2026-11-02T09:01:00+00:00"  # as a cause key holds it
NOW_SHOWN = "2026-11-02 09:01:00 UTC"  # as a detail says it
SEVEN_MINUTES = timedelta(minutes=7)
EXPLICIT_DEADLINE = T0 + timedelta(hours=2)

STALE = OpenHold(9, Reason.STALE_PREPARED, False, "stale_prepared:invoice:INV-42:send:0")
UNKNOWN = OpenHold(7, Reason.UNKNOWN_OUTCOME, True, "unknown_outcome:invoice:INV-42:send:1")
EXEC_FAILED = OpenHold(8, Reason.EXECUTION_FAILED, True, "execution_failed:invoice:INV-42:send:1:x")
CONFLICT = OpenHold(3, Reason.RECEIPT_CONFLICT, True, "receipt_conflict:invoice:INV-42:send:R-2")
INPUT_HELD = OpenHold(4, Reason.INPUT_MISMATCH, False, "input_mismatch:invoice:INV-42:send:x")


def stored(state: State, **kw: Any) -> Operation:
    """An operation as stored after one attempt (none when ``prepared``), three allowed."""
    values: dict[str, Any] = {
        "attempt": 1,
        "max_attempts": 3,
        "execution_id": "exec-1",
        "run_index": 0,
        "deadline": T0 + timedelta(minutes=15),
        "version": 4,
    }
    if state is State.PREPARED:
        values.update(attempt=0, execution_id=None, run_index=None, deadline=None)
    if state is State.CONFIRMED:
        values["receipt"] = "R-1"
    values.update(kw)
    return Operation(OP_ID, state, HASH, "v1", **values)


def request(execution_id: str = "exec-2", **kw: Any) -> DispatchRequest:
    values: dict[str, Any] = {
        "input_hash": HASH,
        "processing_version": "v1",
        "execution_id": execution_id,
        "run_index": 3,
    }
    values.update(kw)
    return DispatchRequest(**values)


def run_dispatch(op: Operation | None, req: DispatchRequest, holds: list[OpenHold]) -> Change:
    return dispatch(
        op, req, holds, NOW, operation_id=OP_ID, max_attempts=3, default_deadline=SEVEN_MINUTES
    )


def refusal(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(IllegalTransition) as raised:
        call()
    return raised.value.code, str(raised.value)


# --------------------------------------------------------------------------- dispatch: new


@pytest.mark.parametrize(
    ("deadline", "expected_deadline"),
    [(None, NOW + SEVEN_MINUTES), (EXPLICIT_DEADLINE, EXPLICIT_DEADLINE)],
    ids=["default-deadline", "given-deadline"],
)
def test_a_new_operation_is_created_dispatching_as_attempt_one(
    deadline: datetime | None, expected_deadline: datetime
) -> None:
    change = run_dispatch(None, request(deadline=deadline), [])
    assert change == Change(
        Decision.GO,
        Operation(
            OP_ID,
            State.DISPATCHING,
            HASH,
            "v1",
            attempt=1,
            max_attempts=3,
            execution_id="exec-2",
            run_index=3,
            deadline=expected_deadline,
        ),
        "dispatched",
        new_attempt=True,
        data={"attempt": 1, "created": True},
    )


APPROVAL_EXPIRED_NOW = NewHold(
    Reason.APPROVAL_EXPIRED,
    f"approval_expired:invoice:INV-42:send:{NOW_TEXT}",
    f"approval expired at {NOW_SHOWN}",
    False,
)
APPROVAL_FOR_V0 = NewHold(
    Reason.APPROVAL_VERSION,
    "approval_version:invoice:INV-42:send:v0:v1",
    "approval names version 'v0', dispatch runs 'v1'",
    False,
)
APPROVAL_PROBLEMS = [
    (Approval("v1", NOW), APPROVAL_EXPIRED_NOW),
    (
        Approval("v1", T0),
        NewHold(
            Reason.APPROVAL_EXPIRED,
            "approval_expired:invoice:INV-42:send:2026-11-02T09:00:00+00:00",
            "approval expired at 2026-11-02 09:00:00 UTC",
            False,
        ),
    ),
    (Approval("v0", None), APPROVAL_FOR_V0),
    (Approval("v0", T0), APPROVAL_FOR_V0),  # the version is checked before the expiry
]
APPROVAL_IDS = ["expires-now", "expired", "other-version", "other-version-and-expired"]


@pytest.mark.parametrize(("approval", "hold"), APPROVAL_PROBLEMS, ids=APPROVAL_IDS)
def test_a_new_operation_without_a_valid_approval_is_recorded_prepared_and_held(
    approval: Approval, hold: NewHold
) -> None:
    change = run_dispatch(None, request(approval=approval), [])
    assert change == Change(
        Decision.HOLD,
        Operation(OP_ID, State.PREPARED, HASH, "v1", max_attempts=3),
        "dispatch_held",
        reason=hold.reason,
        holds=(hold,),
        data={"created": True},
    )


@pytest.mark.parametrize(
    "approval",
    [Approval("v1", None), Approval("v1", NOW + timedelta(microseconds=1))],
    ids=["no-expiry", "expires-just-after-now"],
)
@pytest.mark.parametrize("op", [None, stored(State.PREPARED)], ids=["new", "prepared"])
def test_an_approval_of_this_version_not_yet_expired_lets_the_dispatch_go(
    approval: Approval, op: Operation | None
) -> None:
    change = run_dispatch(op, request(approval=approval), [])
    assert (change.decision, change.reason, change.holds) == (Decision.GO, None, ())


# --------------------------------------------------------------------------- dispatch: held


def test_a_different_input_is_held_with_the_new_hash_in_its_cause_key() -> None:
    change = run_dispatch(stored(State.CONFIRMED), request(input_hash=OTHER_HASH), [])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.INPUT_MISMATCH,
        receipt="R-1",
        holds=(
            NewHold(
                Reason.INPUT_MISMATCH,
                f"input_mismatch:invoice:INV-42:send:{OTHER_HASH}",
                f"dispatch with input {OTHER_HASH} but the operation records {HASH}",
                False,
            ),
        ),
        data={"created": False},
    )


def test_a_different_input_is_named_before_a_different_version() -> None:
    change = run_dispatch(
        stored(State.PREPARED), request(input_hash=OTHER_HASH, processing_version="v2"), []
    )
    assert change.reason is Reason.INPUT_MISMATCH


def test_a_different_version_is_held_with_the_new_version_in_its_cause_key() -> None:
    change = run_dispatch(stored(State.CONFIRMED), request(processing_version="v2"), [])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.VERSION_MISMATCH,
        receipt="R-1",
        holds=(
            NewHold(
                Reason.VERSION_MISMATCH,
                "version_mismatch:invoice:INV-42:send:v2",
                "dispatch with version 'v2' but the operation records 'v1'",
                False,
            ),
        ),
        data={"created": False},
    )


@pytest.mark.parametrize(
    ("op", "req"),
    [
        (stored(State.CONFIRMED), request()),
        (stored(State.DISPATCHING), request("exec-1", run_index=0)),
        (stored(State.FAILED), request()),
    ],
    ids=["confirmed", "dispatching-replay", "failed"],
)
def test_the_first_blocking_hold_answers_before_the_state_is_looked_at(
    op: Operation, req: DispatchRequest
) -> None:
    change = run_dispatch(op, req, [STALE, CONFLICT, UNKNOWN])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.RECEIPT_CONFLICT,
        receipt=op.receipt,
        data={"execution_id": req.execution_id},
    )


def test_a_confirmed_operation_is_skipped_with_its_receipt() -> None:
    change = run_dispatch(stored(State.CONFIRMED), request(), [STALE])
    assert change == Change(Decision.SKIP, None, None, receipt="R-1")


def test_a_cancelled_operation_is_held_without_a_hold() -> None:
    change = run_dispatch(stored(State.CANCELLED), request(), [])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.CANCELLED,
        data={"execution_id": "exec-2"},
    )


def test_the_same_execution_and_run_sending_again_gets_go_and_changes_nothing() -> None:
    change = run_dispatch(stored(State.DISPATCHING), request("exec-1", run_index=0), [])
    assert change == Change(Decision.GO, None, None)


@pytest.mark.parametrize(
    ("execution_id", "run_index"),
    [("exec-2", 0), ("exec-1", 1), ("exec-2", 3)],
    ids=["other-execution", "other-run", "both"],
)
def test_another_dispatch_while_one_is_in_flight_is_held_naming_it(
    execution_id: str, run_index: int
) -> None:
    change = run_dispatch(stored(State.DISPATCHING), request(execution_id, run_index=run_index), [])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.IN_FLIGHT,
        data={"execution_id": execution_id, "in_flight": "exec-1"},
    )


@pytest.mark.parametrize(("approval", "hold"), APPROVAL_PROBLEMS, ids=APPROVAL_IDS)
@pytest.mark.parametrize("state", [State.PREPARED, State.FAILED])
def test_a_known_operation_without_a_valid_approval_is_held_unchanged(
    approval: Approval, hold: NewHold, state: State
) -> None:
    change = run_dispatch(stored(state), request(approval=approval), [STALE])
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=hold.reason,
        holds=(hold,),
        data={"created": False},
    )


def test_an_operation_that_used_its_attempts_is_held_by_its_own_limit() -> None:
    # The limit stored with the operation counts, not the one the caller passes now.
    op = stored(State.FAILED, attempt=3)
    change = dispatch(op, request(), [], NOW, operation_id=OP_ID, max_attempts=10)
    assert change == Change(
        Decision.HOLD,
        None,
        "dispatch_held",
        reason=Reason.MAX_ATTEMPTS,
        holds=(
            NewHold(
                Reason.MAX_ATTEMPTS,
                "max_attempts:invoice:INV-42:send:3",
                "3 attempts used of 3",
                False,
            ),
        ),
        data={"created": False},
    )


def test_an_approval_problem_is_named_before_the_attempt_limit() -> None:
    op = stored(State.FAILED, attempt=3)
    change = run_dispatch(op, request(approval=Approval("v1", NOW)), [])
    assert change.holds == (APPROVAL_EXPIRED_NOW,)


# --------------------------------------------------------------------------- dispatch: again


@pytest.mark.parametrize(
    ("deadline", "expected_deadline"),
    [(None, NOW + SEVEN_MINUTES), (EXPLICIT_DEADLINE, EXPLICIT_DEADLINE)],
    ids=["default-deadline", "given-deadline"],
)
def test_a_failed_operation_is_claimed_again_by_the_new_execution_run_and_deadline(
    deadline: datetime | None, expected_deadline: datetime
) -> None:
    change = run_dispatch(stored(State.FAILED, attempt=2), request(deadline=deadline), [STALE])
    assert change == Change(
        Decision.GO,
        Operation(
            OP_ID,
            State.DISPATCHING,
            HASH,
            "v1",
            attempt=3,
            max_attempts=3,
            execution_id="exec-2",
            run_index=3,
            deadline=expected_deadline,
            version=4,
        ),
        "dispatched",
        new_attempt=True,
        data={"attempt": 3, "from": "failed"},
    )


def test_a_prepared_operation_is_claimed_as_its_next_attempt() -> None:
    change = run_dispatch(stored(State.PREPARED), request(run_index=None), [])
    assert change == Change(
        Decision.GO,
        Operation(
            OP_ID,
            State.DISPATCHING,
            HASH,
            "v1",
            attempt=1,
            max_attempts=3,
            execution_id="exec-2",
            run_index=None,
            deadline=NOW + SEVEN_MINUTES,
            version=4,
        ),
        "dispatched",
        new_attempt=True,
        data={"attempt": 1, "from": "prepared"},
    )


# --------------------------------------------------------------------------- prepare


def test_prepare_creates_the_operation_with_its_attempt_limit() -> None:
    change = prepare(None, HASH, "v1", operation_id=OP_ID, max_attempts=3)
    assert change == Change(
        None, Operation(OP_ID, State.PREPARED, HASH, "v1", max_attempts=3), "prepared"
    )


@pytest.mark.parametrize("state", list(State))
def test_preparing_again_with_the_same_values_changes_nothing(state: State) -> None:
    change = prepare(stored(state), HASH, "v1", operation_id=OP_ID, max_attempts=5)
    assert change == Change(None, None, None)


@pytest.mark.parametrize(
    ("input_hash", "version", "expected"),
    [
        (
            OTHER_HASH,
            "v1",
            ("input_mismatch", "operation invoice:INV-42:send records another input"),
        ),
        (
            HASH,
            "v2",
            (
                "version_mismatch",
                "operation invoice:INV-42:send records another processing version",
            ),
        ),
        (
            OTHER_HASH,
            "v2",
            ("input_mismatch", "operation invoice:INV-42:send records another input"),
        ),
    ],
    ids=["input", "version", "both"],
)
def test_preparing_again_with_other_values_is_refused(
    input_hash: str, version: str, expected: tuple[str, str]
) -> None:
    op = stored(State.PREPARED)
    assert refusal(lambda: prepare(op, input_hash, version, operation_id=OP_ID)) == expected


# --------------------------------------------------------------------------- confirm


def test_a_confirm_of_the_dispatched_attempt_confirms_and_closes_its_outcome_holds() -> None:
    op = stored(State.DISPATCHING, attempt=2)
    change = confirm(op, "R-2", [UNKNOWN, INPUT_HELD, EXEC_FAILED])
    assert change == Change(
        None,
        replace(op, state=State.CONFIRMED, receipt="R-2"),
        "confirmed",
        receipt="R-2",
        resolve_holds=(7, 8),
        resolution=Resolution.CONFIRMED_BY_RECEIPT,
        data={"attempt": 2},
    )


def test_a_confirm_without_outcome_holds_resolves_nothing() -> None:
    op = stored(State.DISPATCHING)
    change = confirm(op, "R-2", [INPUT_HELD])
    assert change == Change(
        None,
        replace(op, state=State.CONFIRMED, receipt="R-2"),
        "confirmed",
        receipt="R-2",
        data={"attempt": 1},
    )


def test_the_same_receipt_again_is_a_noop_that_answers_the_receipt() -> None:
    assert confirm(stored(State.CONFIRMED), "R-1", []) == Change(None, None, None, receipt="R-1")


def test_a_second_different_receipt_opens_a_blocking_conflict_and_keeps_the_first() -> None:
    change = confirm(stored(State.CONFIRMED), "R-2", [])
    assert change == Change(
        None,
        None,
        "receipt_conflict",
        receipt="R-1",
        holds=(
            NewHold(
                Reason.RECEIPT_CONFLICT,
                "receipt_conflict:invoice:INV-42:send:R-2",
                "second receipt 'R-2' differs from 'R-1': possible duplicate effect",
                True,
            ),
        ),
        data={"receipt": "R-2", "attempt": 1},
    )


@pytest.mark.parametrize("state", [State.FAILED, State.CANCELLED])
def test_a_receipt_after_a_rejection_or_a_cancellation_opens_a_blocking_conflict(
    state: State,
) -> None:
    change = confirm(stored(state), "R-2", [])
    assert change == Change(
        None,
        None,
        "receipt_conflict",
        holds=(
            NewHold(
                Reason.RECEIPT_CONFLICT,
                "receipt_conflict:invoice:INV-42:send:R-2",
                f"receipt 'R-2' arrived for an operation in state {state.value}",
                True,
            ),
        ),
        data={"receipt": "R-2", "attempt": 1},
    )


def test_a_prepared_operation_cannot_be_confirmed() -> None:
    assert refusal(lambda: confirm(stored(State.PREPARED), "R-1", [])) == (
        "illegal_transition",
        "operation invoice:INV-42:send is prepared; only a dispatched operation can be confirmed",
    )


# --------------------------------------------------------------------------- fail


def test_a_rejection_fails_the_attempt_and_keeps_everything_else() -> None:
    op = stored(State.DISPATCHING, attempt=2)
    change = fail(op, FailOutcome.REJECTED, "422 invalid invoice")
    assert change == Change(
        None,
        replace(op, state=State.FAILED),
        "failed",
        data={"attempt": 2, "outcome": "rejected"},
    )


def test_a_late_rejection_closes_the_outcome_holds_and_leaves_the_others() -> None:
    op = stored(State.DISPATCHING, attempt=1)
    change = fail(op, FailOutcome.REJECTED, "422", [STALE, UNKNOWN, EXEC_FAILED])
    assert change == Change(
        None,
        replace(op, state=State.FAILED),
        "failed",
        resolve_holds=(7, 8),
        resolution=Resolution.REJECTED_BY_TARGET,
        data={"attempt": 1, "outcome": "rejected"},
    )


def test_an_unknown_outcome_leaves_every_hold_open() -> None:
    change = fail(stored(State.DISPATCHING, attempt=1), FailOutcome.UNKNOWN, "timeout", [UNKNOWN])
    assert (change.resolve_holds, change.resolution) == ((), None)


def test_an_unknown_outcome_keeps_the_operation_dispatching_and_opens_a_blocking_hold() -> None:
    change = fail(stored(State.DISPATCHING, attempt=2), FailOutcome.UNKNOWN, "timeout after 30s")
    assert change == Change(
        None,
        None,
        "failed_unknown",
        holds=(
            NewHold(
                Reason.UNKNOWN_OUTCOME,
                "unknown_outcome:invoice:INV-42:send:2",
                "timeout after 30s",
                True,
            ),
        ),
        data={"attempt": 2, "outcome": "unknown"},
    )


@pytest.mark.parametrize("outcome", list(FailOutcome))
@pytest.mark.parametrize("state", [State.PREPARED, State.CONFIRMED, State.FAILED, State.CANCELLED])
def test_only_a_dispatched_operation_can_fail(state: State, outcome: FailOutcome) -> None:
    assert refusal(lambda: fail(stored(state), outcome, "boom")) == (
        "illegal_transition",
        f"operation invoice:INV-42:send is {state.value}; only a dispatched operation can fail",
    )


# --------------------------------------------------------------------------- outcome holds


def test_an_unknown_outcome_hold_is_keyed_by_operation_and_attempt() -> None:
    assert unknown_outcome_hold(stored(State.DISPATCHING, attempt=2), "no answer") == NewHold(
        Reason.UNKNOWN_OUTCOME, "unknown_outcome:invoice:INV-42:send:2", "no answer", True
    )


def test_an_execution_failed_hold_is_keyed_by_operation_attempt_and_execution() -> None:
    hold = execution_failed_hold(stored(State.DISPATCHING, attempt=2), "exec-9", "it crashed")
    assert hold == NewHold(
        Reason.EXECUTION_FAILED,
        "execution_failed:invoice:INV-42:send:2:exec-9",
        "it crashed",
        True,
    )
