"""A person's decisions on holds pinned to whole values: the operation afterwards, the holds
each decision closes, the resolution, the event and its payload, and the exact refusals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from flowledger.domain import (
    BLOCKING_REASONS,
    DECISIONS,
    Approval,
    Change,
    IllegalTransition,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
    allow_attempt,
    allowed,
    cancel,
    confirm_with_evidence,
    dismiss,
    reapprove,
    refusal,
    release_for_retry,
)

OP_ID = "invoice:INV-42:send"
HASH = "sha256:" + "a" * 64
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)

STALE = OpenHold(9, Reason.STALE_PREPARED, False, "stale_prepared:invoice:INV-42:send:0")
UNKNOWN = OpenHold(7, Reason.UNKNOWN_OUTCOME, True, "unknown_outcome:invoice:INV-42:send:2")
EXEC_FAILED = OpenHold(8, Reason.EXECUTION_FAILED, True, "execution_failed:invoice:INV-42:send:2:e")
CONFLICT = OpenHold(3, Reason.RECEIPT_CONFLICT, True, "receipt_conflict:invoice:INV-42:send:R-2")
CONFLICT_TOO = OpenHold(
    5, Reason.RECEIPT_CONFLICT, True, "receipt_conflict:invoice:INV-42:send:R-3"
)
OVERDUE = OpenHold(6, Reason.OVERDUE, False, "overdue:7:2026-11-02T10:00:00+00:00")


def stored(state: State, **kw: Any) -> Operation:
    """An operation as stored during or after its second attempt."""
    values: dict[str, Any] = {
        "attempt": 2,
        "max_attempts": 3,
        "execution_id": "exec-2",
        "run_index": 1,
        "deadline": T0 + timedelta(minutes=15),
        "version": 6,
    }
    if state is State.CONFIRMED:
        values["receipt"] = "R-1"
    values.update(kw)
    return Operation(OP_ID, state, HASH, "v1", **values)


def refused(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(IllegalTransition) as raised:
        call()
    return raised.value.code, str(raised.value)


NOTE_REQUIRED = ("note_required", "a note is required")
BLANK_NOTES = ["", "   ", " \t\n "]


# --------------------------------------------------------------------------- notes


@pytest.mark.parametrize("note", BLANK_NOTES, ids=["empty", "spaces", "whitespace"])
@pytest.mark.parametrize(
    "decide",
    [
        lambda note: confirm_with_evidence(stored(State.DISPATCHING), UNKNOWN, [UNKNOWN], "", note),
        lambda note: release_for_retry(stored(State.DISPATCHING), UNKNOWN, [UNKNOWN], note),
        lambda note: cancel(stored(State.CANCELLED), [], note),
        lambda note: dismiss(UNKNOWN, note),
    ],
    ids=["confirm_with_evidence", "release_for_retry", "cancel", "dismiss"],
)
def test_every_decision_is_refused_without_a_note_before_anything_else(
    decide: Callable[[str], Change], note: str
) -> None:
    assert refused(lambda: decide(note)) == NOTE_REQUIRED


# --------------------------------------------------------------------------- confirm with evidence


@pytest.mark.parametrize("receipt", ["", "  "], ids=["empty", "blank"])
def test_confirm_with_evidence_needs_a_receipt(receipt: str) -> None:
    op = stored(State.DISPATCHING)
    assert refused(lambda: confirm_with_evidence(op, UNKNOWN, [UNKNOWN], receipt, "seen")) == (
        "receipt_required",
        "a receipt is required",
    )


def test_evidence_for_an_unknown_outcome_confirms_and_closes_every_outcome_hold() -> None:
    op = stored(State.DISPATCHING)
    change = confirm_with_evidence(
        op, UNKNOWN, [STALE, UNKNOWN, CONFLICT, EXEC_FAILED], "R-9", "seen in the CRM"
    )
    assert change == Change(
        None,
        replace(op, state=State.CONFIRMED, receipt="R-9"),
        None,
        receipt="R-9",
        resolve_holds=(7, 8),
        resolution=Resolution.CONFIRMED_WITH_EVIDENCE,
        data={"receipt": "R-9", "attempt": 2},
    )


def test_evidence_with_no_outcome_hold_open_closes_the_hold_it_was_given() -> None:
    op = stored(State.DISPATCHING)
    change = confirm_with_evidence(op, STALE, [STALE], "R-9", "seen in the CRM")
    assert change == Change(
        None,
        replace(op, state=State.CONFIRMED, receipt="R-9"),
        None,
        receipt="R-9",
        resolve_holds=(9,),
        resolution=Resolution.CONFIRMED_WITH_EVIDENCE,
        data={"receipt": "R-9", "attempt": 2},
    )


@pytest.mark.parametrize(
    "op",
    [
        stored(State.CONFIRMED),
        stored(State.FAILED),
        stored(State.CANCELLED),
        stored(State.CANCELLED, receipt="R-0"),
    ],
    ids=["confirmed", "failed", "cancelled", "cancelled-with-receipt"],
)
def test_a_receipt_conflict_resolved_with_evidence_confirms_the_named_receipt(
    op: Operation,
) -> None:
    change = confirm_with_evidence(
        op, CONFLICT, [OVERDUE, CONFLICT, UNKNOWN, CONFLICT_TOO], "R-2", "R-1 was voided"
    )
    assert change == Change(
        None,
        replace(op, state=State.CONFIRMED, receipt="R-2"),
        None,
        receipt="R-2",
        resolve_holds=(3, 5),
        resolution=Resolution.CONFIRMED_WITH_EVIDENCE,
        data={"receipt": "R-2"},
    )


@pytest.mark.parametrize("state", [State.PREPARED, State.CONFIRMED, State.FAILED, State.CANCELLED])
def test_evidence_for_another_hold_needs_a_dispatched_operation(state: State) -> None:
    op = stored(state)
    assert refused(lambda: confirm_with_evidence(op, UNKNOWN, [UNKNOWN], "R-9", "seen")) == (
        "illegal_transition",
        f"operation invoice:INV-42:send is {state.value}; confirm with evidence applies "
        "to a dispatched operation",
    )


# --------------------------------------------------------------------------- release for retry


@pytest.mark.parametrize("hold", [UNKNOWN, EXEC_FAILED], ids=["unknown", "execution-failed"])
def test_release_for_retry_prepares_the_operation_afresh_and_keeps_its_attempt(
    hold: OpenHold,
) -> None:
    op = stored(State.DISPATCHING)
    change = release_for_retry(op, hold, [STALE, UNKNOWN, CONFLICT, EXEC_FAILED], "not in CRM")
    assert change == Change(
        None,
        Operation(OP_ID, State.PREPARED, HASH, "v1", attempt=2, max_attempts=3, version=6),
        None,
        resolve_holds=(7, 8),
        resolution=Resolution.RELEASED_FOR_RETRY,
        data={"attempt": 2},
    )


@pytest.mark.parametrize(
    ("state", "hold"),
    [
        (State.DISPATCHING, CONFLICT),
        (State.DISPATCHING, STALE),
        (State.PREPARED, UNKNOWN),
        (State.CONFIRMED, UNKNOWN),
        (State.FAILED, EXEC_FAILED),
        (State.CANCELLED, UNKNOWN),
    ],
    ids=lambda v: v.value if isinstance(v, State) else v.reason.value,
)
def test_release_for_retry_needs_an_outcome_hold_on_a_dispatched_operation(
    state: State, hold: OpenHold
) -> None:
    op = stored(state)
    assert refused(lambda: release_for_retry(op, hold, [hold], "not sent")) == (
        "illegal_transition",
        "release for retry applies to an unknown outcome of a dispatched operation; "
        f"invoice:INV-42:send is {state.value}, held as {hold.reason.value}",
    )


# --------------------------------------------------------------------------- cancel


@pytest.mark.parametrize("state", [State.PREPARED, State.DISPATCHING, State.FAILED])
def test_cancel_closes_every_open_hold_of_the_operation(state: State) -> None:
    op = stored(state)
    change = cancel(op, [UNKNOWN, STALE, EXEC_FAILED], "customer withdrew")
    assert change == Change(
        None,
        replace(op, state=State.CANCELLED),
        None,
        resolve_holds=(7, 9, 8),
        resolution=Resolution.CANCELLED,
        data={"from": state.value},
    )


def test_a_confirmed_operation_with_a_receipt_conflict_can_be_cancelled() -> None:
    op = stored(State.CONFIRMED)
    change = cancel(op, [OVERDUE, CONFLICT], "both receipts voided")
    assert change == Change(
        None,
        replace(op, state=State.CANCELLED),
        None,
        resolve_holds=(6, 3),
        resolution=Resolution.CANCELLED,
        data={"from": "confirmed"},
    )


@pytest.mark.parametrize(
    ("state", "holds", "message"),
    [
        (State.CONFIRMED, [], "operation invoice:INV-42:send is confirmed; it cannot be cancelled"),
        (
            State.CONFIRMED,
            [OVERDUE],
            "operation invoice:INV-42:send is confirmed; it cannot be cancelled",
        ),
        (State.CANCELLED, [], "operation invoice:INV-42:send is already cancelled"),
        (State.CANCELLED, [CONFLICT], "operation invoice:INV-42:send is already cancelled"),
    ],
    ids=["confirmed", "confirmed-other-hold", "cancelled", "cancelled-with-conflict"],
)
def test_cancel_is_refused_for_a_settled_operation(
    state: State, holds: list[OpenHold], message: str
) -> None:
    op = stored(state)
    assert refused(lambda: cancel(op, holds, "withdrawn")) == ("illegal_transition", message)


# --------------------------------------------------------------------------- dismiss


@pytest.mark.parametrize("hold", [STALE, OVERDUE], ids=lambda h: h.reason.value)
def test_dismiss_closes_one_attention_item(hold: OpenHold) -> None:
    assert dismiss(hold, "seen") == Change(
        None,
        None,
        None,
        resolve_holds=(hold.hold_id,),
        resolution=Resolution.DISMISSED,
    )


@pytest.mark.parametrize(
    ("hold", "instead"),
    [
        (UNKNOWN, "confirm, release for retry or cancel"),
        (EXEC_FAILED, "confirm, release for retry or cancel"),
        (CONFLICT, "confirm or cancel"),
    ],
    ids=["unknown_outcome", "execution_failed", "receipt_conflict"],
)
def test_a_blocking_hold_cannot_be_dismissed(hold: OpenHold, instead: str) -> None:
    assert refused(lambda: dismiss(hold, "seen")) == (
        "blocking_hold",
        f"a blocking hold is resolved by {instead}, not dismissed",
    )


# --------------------------------------------------------------------------- which are allowed

ALL_REASONS = [r for r in Reason if r not in (Reason.IN_FLIGHT, Reason.CANCELLED)]


def _hold_of(reason: Reason) -> OpenHold:
    return OpenHold(4, reason, reason in BLOCKING_REASONS, f"{reason.value}:x")


def _decide(action: str, hold: OpenHold, op: Operation, holds: list[OpenHold]) -> object:
    if action == "confirm":
        return confirm_with_evidence(op, hold, holds, "R-9", "seen")
    if action == "release":
        return release_for_retry(op, hold, holds, "not there")
    if action == "cancel":
        return cancel(op, holds, "not wanted")
    if action == "reapprove":
        return reapprove(op, hold, holds, Approval(op.processing_version), "approved", T0)
    if action == "allow-attempt":
        return allow_attempt(op, hold, holds, "one more")
    return dismiss(hold, "seen")


@pytest.mark.parametrize("action", DECISIONS)
@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize("reason", ALL_REASONS)
@pytest.mark.parametrize("conflict", [False, True])
def test_a_decision_is_allowed_exactly_when_it_succeeds(
    action: str, state: State, reason: Reason, conflict: bool
) -> None:
    hold = _hold_of(reason)
    holds = [hold, *([CONFLICT] if conflict and reason is not Reason.RECEIPT_CONFLICT else [])]
    has_conflict = conflict or reason is Reason.RECEIPT_CONFLICT
    op = stored(state)
    expected = refusal(action, hold, OP_ID, state, has_conflict)
    if expected is None:
        _decide(action, hold, op, holds)
        assert action in allowed(hold, OP_ID, state, has_conflict)
    else:
        assert refused(lambda: _decide(action, hold, op, holds)) == (
            expected.code,
            str(expected),
        )
        assert action not in allowed(hold, OP_ID, state, has_conflict)


@pytest.mark.parametrize(
    ("reason", "state", "conflict", "offered"),
    [
        (Reason.UNKNOWN_OUTCOME, State.DISPATCHING, False, ("confirm", "release", "cancel")),
        (Reason.EXECUTION_FAILED, State.DISPATCHING, False, ("confirm", "release", "cancel")),
        (Reason.RECEIPT_CONFLICT, State.CONFIRMED, True, ("confirm", "cancel")),
        (Reason.STALE_PREPARED, State.PREPARED, False, ("cancel", "dismiss")),
        (Reason.OVERDUE, State.CONFIRMED, False, ("dismiss",)),
        (Reason.OVERDUE, State.CONFIRMED, True, ("cancel", "dismiss")),
        (Reason.OVERDUE, State.DISPATCHING, False, ("confirm", "cancel", "dismiss")),
        (Reason.INPUT_MISMATCH, State.CANCELLED, False, ("dismiss",)),
        (Reason.APPROVAL_EXPIRED, State.PREPARED, False, ("cancel", "dismiss", "reapprove")),
        (Reason.APPROVAL_VERSION, State.FAILED, False, ("cancel", "dismiss", "reapprove")),
        (Reason.APPROVAL_EXPIRED, State.DISPATCHING, False, ("confirm", "cancel", "dismiss")),
        (Reason.MAX_ATTEMPTS, State.FAILED, False, ("cancel", "dismiss", "allow-attempt")),
        (Reason.MAX_ATTEMPTS, State.CONFIRMED, False, ("dismiss",)),
    ],
)
def test_allowed_names_the_decisions_a_hold_offers(
    reason: Reason, state: State, conflict: bool, offered: tuple[str, ...]
) -> None:
    assert allowed(_hold_of(reason), OP_ID, state, conflict) == offered


def test_a_hold_on_no_operation_can_only_be_dismissed() -> None:
    stale = OpenHold(2, Reason.SOURCE_STALE, False, "source_stale:prod:never")
    assert allowed(stale, None, None, False) == ("dismiss",)
    why = refusal("confirm", stale, None, None, False)
    assert why is not None and why.code == "no_operation"
    assert str(why) == "hold 2 concerns no operation; dismiss it once handled"
    with pytest.raises(ValueError, match="unknown decision 'assign'"):
        refusal("assign", stale, None, None, False)
