"""A person's decisions on a hold: confirm with evidence, release for retry, cancel, dismiss,
re-approve (an approval that expired or names another version) and allow another attempt
(past ``max_attempts``). Each needs a note. A decision is recorded as one ``hold_resolved``
event per hold it closes, carrying the decision's ``data`` (the receipt, the attempt, the
state it left, the new approval or ``max_attempts``); it has no event of its own.

Which decisions a hold allows is decided once, by :func:`refusal`: the decisions below raise
what it returns, and the UI asks it (through :func:`allowed`) before it offers a key."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from flowledger.domain.chain import data_time
from flowledger.domain.model import (
    APPROVAL_REASONS,
    OUTCOME_REASONS,
    Approval,
    Change,
    IllegalTransition,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
)

# The decisions a person can take on a hold, in the order the UI offers them.
DECISIONS = ("confirm", "release", "cancel", "dismiss", "reapprove", "allow-attempt")
# The operations a re-approval or another attempt concerns: those the next dispatch claims.
_TO_BE_WRITTEN = frozenset({State.PREPARED, State.FAILED})

# --------------------------------------------------------------------------- which are allowed


def refusal(
    action: str,
    hold: OpenHold,
    operation_id: str | None,
    state: State | None,
    conflict: bool,
) -> IllegalTransition | None:
    """Why ``action`` (one of :data:`DECISIONS`) cannot be taken on ``hold``, or ``None`` when
    it can. ``operation_id`` and ``state`` are those of the operation the hold concerns (both
    ``None`` when it concerns none); ``conflict`` says whether that operation has an open
    ``receipt_conflict`` hold."""
    if action == "dismiss":
        return _dismiss_refusal(hold)
    if action not in DECISIONS:
        raise ValueError(f"unknown decision {action!r}")
    if operation_id is None or state is None:
        return IllegalTransition(
            f"hold {hold.hold_id} concerns no operation; dismiss it once handled",
            code="no_operation",
        )
    if action == "confirm":
        if hold.reason is Reason.RECEIPT_CONFLICT or state is State.DISPATCHING:
            return None
        return IllegalTransition(
            f"operation {operation_id} is {state.value}; confirm with evidence applies "
            "to a dispatched operation"
        )
    if action == "release":
        if state is State.DISPATCHING and hold.reason in OUTCOME_REASONS:
            return None
        return IllegalTransition(
            f"release for retry applies to an unknown outcome of a dispatched operation; "
            f"{operation_id} is {state.value}, held as {hold.reason.value}"
        )
    if action == "reapprove":
        return _next_dispatch_refusal(
            "re-approve applies to an expired or mismatched approval",
            hold.reason in APPROVAL_REASONS,
            hold,
            operation_id,
            state,
        )
    if action == "allow-attempt":
        return _next_dispatch_refusal(
            "another attempt applies to an operation held at max_attempts",
            hold.reason is Reason.MAX_ATTEMPTS,
            hold,
            operation_id,
            state,
        )
    return _cancel_refusal(operation_id, state, conflict)


def _next_dispatch_refusal(
    applies: str, reason_fits: bool, hold: OpenHold, operation_id: str, state: State
) -> IllegalTransition | None:
    """A decision about the operation's next dispatch: refused on a hold of another reason,
    or once the operation is no longer waiting to be written."""
    if not reason_fits:
        return IllegalTransition(f"{applies}; hold {hold.hold_id} is {hold.reason.value}")
    if state not in _TO_BE_WRITTEN:
        return IllegalTransition(f"{applies}; {operation_id} is {state.value}")
    return None


def _dismiss_refusal(hold: OpenHold) -> IllegalTransition | None:
    """A blocking hold is never dismissed: the refusal names the decisions its reason allows
    instead (a receipt conflict is never released for retry: its write happened)."""
    if not hold.blocking:
        return None
    instead = (
        "confirm or cancel"
        if hold.reason is Reason.RECEIPT_CONFLICT
        else "confirm, release for retry or cancel"
    )
    return IllegalTransition(
        f"a blocking hold is resolved by {instead}, not dismissed", code="blocking_hold"
    )


def _cancel_refusal(operation_id: str, state: State, conflict: bool) -> IllegalTransition | None:
    if state is State.CANCELLED:
        return IllegalTransition(f"operation {operation_id} is already cancelled")
    if state is State.CONFIRMED and not conflict:
        return IllegalTransition(f"operation {operation_id} is confirmed; it cannot be cancelled")
    return None


def allowed(
    hold: OpenHold, operation_id: str | None, state: State | None, conflict: bool
) -> tuple[str, ...]:
    """The decisions :func:`refusal` lets a person take on ``hold``, in :data:`DECISIONS`
    order."""
    return tuple(a for a in DECISIONS if refusal(a, hold, operation_id, state, conflict) is None)


def _check(action: str, hold: OpenHold, op: Operation, holds: list[OpenHold]) -> None:
    conflict = any(h.reason is Reason.RECEIPT_CONFLICT for h in holds)
    refused = refusal(action, hold, op.operation_id, op.state, conflict)
    if refused is not None:
        raise refused


# --------------------------------------------------------------------------- resolutions


def _require_note(note: str) -> str:
    note = note.strip()
    if not note:
        raise IllegalTransition("a note is required", code="note_required")
    return note


def confirm_with_evidence(
    op: Operation, hold: OpenHold, holds: list[OpenHold], receipt: str, note: str
) -> Change:
    """A person saw the effect in the target system and records its receipt."""
    _require_note(note)
    if not receipt.strip():
        raise IllegalTransition("a receipt is required", code="receipt_required")
    _check("confirm", hold, op, holds)
    if hold.reason is Reason.RECEIPT_CONFLICT:
        # The person names the receipt that stands; an operation that had failed or been
        # cancelled is confirmed, since the effect happened.
        conflict = [h.hold_id for h in holds if h.reason is Reason.RECEIPT_CONFLICT]
        changed = replace(op, state=State.CONFIRMED, receipt=receipt)
        return Change(
            None,
            changed,
            None,
            receipt=receipt,
            resolve_holds=tuple(conflict),
            resolution=Resolution.CONFIRMED_WITH_EVIDENCE,
            data={"receipt": receipt},
        )
    outcome = tuple(h.hold_id for h in holds if h.reason in OUTCOME_REASONS) or (hold.hold_id,)
    return Change(
        None,
        replace(op, state=State.CONFIRMED, receipt=receipt),
        None,
        receipt=receipt,
        resolve_holds=outcome,
        resolution=Resolution.CONFIRMED_WITH_EVIDENCE,
        data={"receipt": receipt, "attempt": op.attempt},
    )


def release_for_retry(op: Operation, hold: OpenHold, holds: list[OpenHold], note: str) -> Change:
    """A person has evidence the write did not happen: the operation may be dispatched again."""
    _require_note(note)
    _check("release", hold, op, holds)
    outcome = tuple(h.hold_id for h in holds if h.reason in OUTCOME_REASONS)
    return Change(
        None,
        replace(op, state=State.PREPARED, execution_id=None, run_index=None, deadline=None),
        None,
        resolve_holds=outcome,
        resolution=Resolution.RELEASED_FOR_RETRY,
        data={"attempt": op.attempt},
    )


def cancel(op: Operation, holds: list[OpenHold], note: str) -> Change:
    """A person decides the operation will not happen (or not be retried). Which hold the
    person acted from does not matter: every open hold of the operation closes."""
    _require_note(note)
    conflict = any(h.reason is Reason.RECEIPT_CONFLICT for h in holds)
    refused = _cancel_refusal(op.operation_id, op.state, conflict)
    if refused is not None:
        raise refused
    return Change(
        None,
        replace(op, state=State.CANCELLED),
        None,
        resolve_holds=tuple(h.hold_id for h in holds),
        resolution=Resolution.CANCELLED,
        data={"from": op.state.value},
    )


def dismiss(hold: OpenHold, note: str) -> Change:
    """Close an attention item that does not block (a person has seen it)."""
    _require_note(note)
    refused = refusal("dismiss", hold, None, None, False)
    if refused is not None:
        raise refused
    return Change(None, None, None, resolve_holds=(hold.hold_id,), resolution=Resolution.DISMISSED)


def reapprove(
    op: Operation,
    hold: OpenHold,
    holds: list[OpenHold],
    approval: Approval,
    note: str,
    now: datetime,
) -> Change:
    """A person approves the operation again: for its processing version, until
    ``approval.expires_at`` (or for good). A later dispatch whose own approval expired or
    names another version goes ahead on it; the operation's approval holds close."""
    _require_note(note)
    _check("reapprove", hold, op, holds)
    if approval.version != op.processing_version:
        raise IllegalTransition(
            f"operation {op.operation_id} runs version {op.processing_version!r}; an approval "
            f"of {approval.version!r} would not let it through",
            code="approval_version",
        )
    if approval.expires_at is not None and approval.expires_at <= now:
        raise IllegalTransition("the new approval has expired already", code="approval_expired")
    return Change(
        None,
        replace(op, reapproval=approval),
        None,
        resolve_holds=tuple(h.hold_id for h in holds if h.reason in APPROVAL_REASONS),
        resolution=Resolution.REAPPROVED,
        data={
            "approval": {"version": approval.version, "expires_at": data_time(approval.expires_at)}
        },
    )


def allow_attempt(op: Operation, hold: OpenHold, holds: list[OpenHold], note: str) -> Change:
    """A person allows one attempt more than ``max_attempts``: the next dispatch may write
    (attempt ``attempt + 1``); the operation's max_attempts holds close."""
    _require_note(note)
    _check("allow-attempt", hold, op, holds)
    allowed_now = op.attempt + 1
    return Change(
        None,
        replace(op, max_attempts=allowed_now),
        None,
        resolve_holds=tuple(h.hold_id for h in holds if h.reason is Reason.MAX_ATTEMPTS),
        resolution=Resolution.ATTEMPT_ALLOWED,
        data={"max_attempts": allowed_now},
    )
