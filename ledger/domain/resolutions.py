"""A person's decisions on a hold: confirm with evidence, release for retry, cancel, dismiss.
Each needs a note. A decision is recorded as one ``hold_resolved`` event per hold it closes,
carrying the decision's ``data`` (the receipt, the attempt, the state it left); it has no event
of its own."""

from __future__ import annotations

from dataclasses import replace

from ledger.domain.model import (
    OUTCOME_REASONS,
    Change,
    IllegalTransition,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
)

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
    if op.state is not State.DISPATCHING:
        raise IllegalTransition(
            f"operation {op.operation_id} is {op.state.value}; confirm with evidence applies "
            "to a dispatched operation"
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
    if op.state is not State.DISPATCHING or hold.reason not in OUTCOME_REASONS:
        raise IllegalTransition(
            f"release for retry applies to an unknown outcome of a dispatched operation; "
            f"{op.operation_id} is {op.state.value} with a {hold.reason.value} hold"
        )
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
    """A person decides the operation will not happen (or not be retried)."""
    _require_note(note)
    if op.state is State.CANCELLED:
        raise IllegalTransition(f"operation {op.operation_id} is already cancelled")
    if op.state is State.CONFIRMED and not any(h.reason is Reason.RECEIPT_CONFLICT for h in holds):
        raise IllegalTransition(f"operation {op.operation_id} is confirmed; it cannot be cancelled")
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
    if hold.blocking:
        raise IllegalTransition(
            "a blocking hold is resolved by confirm, release for retry or cancel, not dismissed",
            code="blocking_hold",
        )
    return Change(None, None, None, resolve_holds=(hold.hold_id,), resolution=Resolution.DISMISSED)
