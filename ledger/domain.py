"""The ledger's rules as plain functions over plain values.

Nothing here reads a clock, a file, a socket or a database: the caller passes the current time
and the operation as it is stored, and gets back what must change and what to answer. Every
illegal move raises :class:`IllegalTransition`; every legal one returns a value describing the
new state, the holds to open and the event to record, so that storage can write all of it in
one transaction.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any


class State(enum.StrEnum):
    PREPARED = "prepared"
    DISPATCHING = "dispatching"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Decision(enum.StrEnum):
    GO = "go"
    SKIP = "skip"
    HOLD = "hold"


class Reason(enum.StrEnum):
    """Why a dispatch was not answered ``go``, and why a hold exists."""

    # Holds a person must resolve (blocking).
    UNKNOWN_OUTCOME = "unknown_outcome"
    EXECUTION_FAILED = "execution_failed"
    RECEIPT_CONFLICT = "receipt_conflict"
    # Attention items that do not block dispatches.
    INPUT_MISMATCH = "input_mismatch"
    VERSION_MISMATCH = "version_mismatch"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_VERSION = "approval_version_mismatch"
    MAX_ATTEMPTS = "max_attempts"
    STALE_PREPARED = "stale_prepared"
    EXECUTION_STUCK = "execution_stuck"
    OVERDUE = "overdue"
    SOURCE_STALE = "source_stale"
    # Answers only: no hold is opened for these.
    IN_FLIGHT = "in_flight"
    CANCELLED = "cancelled"


BLOCKING_REASONS = frozenset(
    {Reason.UNKNOWN_OUTCOME, Reason.EXECUTION_FAILED, Reason.RECEIPT_CONFLICT}
)

# Holds about "did the write of the current attempt happen?"; resolving the outcome resolves
# all of them at once.
OUTCOME_REASONS = frozenset({Reason.UNKNOWN_OUTCOME, Reason.EXECUTION_FAILED})


class FailOutcome(enum.StrEnum):
    REJECTED = "rejected"  # the target said no: nothing was written
    UNKNOWN = "unknown"  # the call died: the write may or may not have happened


class Resolution(enum.StrEnum):
    CONFIRMED_WITH_EVIDENCE = "confirmed_with_evidence"
    RELEASED_FOR_RETRY = "released_for_retry"
    CANCELLED = "cancelled"
    DISMISSED = "dismissed"
    CONFIRMED_BY_RECEIPT = "confirmed_by_receipt"  # the workflow's own late confirm


class IllegalTransition(Exception):
    """An action that the state machine does not allow from the current state."""

    def __init__(self, message: str, *, code: str = "illegal_transition") -> None:
        super().__init__(message)
        self.code = code


DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_DISPATCH_DEADLINE = timedelta(minutes=15)
DEFAULT_HOLD_DEADLINE = timedelta(hours=4)
DEFAULT_BLOCKING_HOLD_DEADLINE = timedelta(hours=1)  # the workflow's writes wait meanwhile
MAX_ID_LENGTH = 200


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Approval:
    version: str
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Operation:
    """An operation as stored: what the rules need to decide."""

    operation_id: str
    state: State
    input_hash: str
    processing_version: str
    attempt: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    execution_id: str | None = None
    run_index: int | None = None
    receipt: str | None = None
    deadline: datetime | None = None
    version: int = 0


@dataclass(frozen=True)
class OpenHold:
    hold_id: int
    reason: Reason
    blocking: bool
    cause_key: str


@dataclass(frozen=True)
class DispatchRequest:
    input_hash: str
    processing_version: str
    execution_id: str
    run_index: int | None = None
    deadline: datetime | None = None
    approval: Approval | None = None


@dataclass(frozen=True)
class NewHold:
    """A hold the caller must open (at most once per ``cause_key``)."""

    reason: Reason
    cause_key: str
    detail: str
    blocking: bool

    @classmethod
    def of(cls, reason: Reason, cause_key: str, detail: str) -> NewHold:
        return cls(reason, cause_key, detail, reason in BLOCKING_REASONS)


@dataclass(frozen=True)
class Change:
    """The outcome of one rule: the operation afterwards (``None`` when unchanged), the answer,
    the holds to open or resolve, and the event to record."""

    decision: Decision | None
    operation: Operation | None
    event: str | None
    reason: Reason | None = None
    receipt: str | None = None
    holds: tuple[NewHold, ...] = ()
    resolve_holds: tuple[int, ...] = ()
    resolution: Resolution | None = None
    new_attempt: bool = False
    data: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- dispatch


def dispatch(
    op: Operation | None,
    req: DispatchRequest,
    holds: list[OpenHold],
    now: datetime,
    *,
    operation_id: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    default_deadline: timedelta = DEFAULT_DISPATCH_DEADLINE,
) -> Change:
    """Decide whether a workflow may write now.

    ``go`` only when the intent can be recorded as ``dispatching``; the caller must commit that
    durably before it answers.
    """
    deadline = req.deadline or now + default_deadline
    approval_problem = _approval_problem(req, now, operation_id)

    if op is None:
        if approval_problem is not None:
            prepared = Operation(
                operation_id,
                State.PREPARED,
                req.input_hash,
                req.processing_version,
                max_attempts=max_attempts,
            )
            return _held(prepared, approval_problem, created=True)
        created = Operation(
            operation_id,
            State.DISPATCHING,
            req.input_hash,
            req.processing_version,
            attempt=1,
            max_attempts=max_attempts,
            execution_id=req.execution_id,
            run_index=req.run_index,
            deadline=deadline,
        )
        return Change(
            Decision.GO,
            created,
            "dispatched",
            new_attempt=True,
            data={"attempt": 1, "created": True},
        )

    if req.input_hash != op.input_hash:
        return _held(
            op,
            NewHold.of(
                Reason.INPUT_MISMATCH,
                f"input_mismatch:{op.operation_id}:{req.input_hash}",
                f"dispatch with input {req.input_hash} but the operation records {op.input_hash}",
            ),
        )
    if req.processing_version != op.processing_version:
        return _held(
            op,
            NewHold.of(
                Reason.VERSION_MISMATCH,
                f"version_mismatch:{op.operation_id}:{req.processing_version}",
                f"dispatch with version {req.processing_version!r} but the operation records "
                f"{op.processing_version!r}",
            ),
        )

    blocking = [h for h in holds if h.blocking]
    if blocking:
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=blocking[0].reason,
            receipt=op.receipt,
            data={"execution_id": req.execution_id},
        )

    if op.state is State.CONFIRMED:
        return Change(Decision.SKIP, None, None, receipt=op.receipt)
    if op.state is State.CANCELLED:
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=Reason.CANCELLED,
            data={"execution_id": req.execution_id},
        )
    if op.state is State.DISPATCHING:
        if req.execution_id == op.execution_id and req.run_index == op.run_index:
            return Change(Decision.GO, None, None)  # a replay gets the same answer
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=Reason.IN_FLIGHT,
            data={"execution_id": req.execution_id, "in_flight": op.execution_id},
        )

    if approval_problem is not None:
        return _held(op, approval_problem)
    if op.attempt + 1 > op.max_attempts:
        return _held(
            op,
            NewHold.of(
                Reason.MAX_ATTEMPTS,
                f"max_attempts:{op.operation_id}:{op.attempt}",
                f"{op.attempt} attempts used of {op.max_attempts}",
            ),
        )
    attempt = op.attempt + 1
    claimed = replace(
        op,
        state=State.DISPATCHING,
        attempt=attempt,
        execution_id=req.execution_id,
        run_index=req.run_index,
        deadline=deadline,
    )
    return Change(
        Decision.GO,
        claimed,
        "dispatched",
        new_attempt=True,
        data={"attempt": attempt, "from": op.state.value},
    )


def _approval_problem(req: DispatchRequest, now: datetime, operation_id: str) -> NewHold | None:
    approval = req.approval
    if approval is None:
        return None
    if approval.version != req.processing_version:
        return NewHold.of(
            Reason.APPROVAL_VERSION,
            f"approval_version:{operation_id}:{approval.version}:{req.processing_version}",
            f"approval names version {approval.version!r}, dispatch runs "
            f"{req.processing_version!r}",
        )
    if approval.expires_at is not None and approval.expires_at <= now:
        return NewHold.of(
            Reason.APPROVAL_EXPIRED,
            f"approval_expired:{operation_id}:{approval.expires_at.isoformat()}",
            f"approval expired at {approval.expires_at.isoformat()}",
        )
    return None


def _held(op: Operation, hold: NewHold, *, created: bool = False) -> Change:
    return Change(
        Decision.HOLD,
        op if created else None,
        "dispatch_held",
        reason=hold.reason,
        receipt=op.receipt,
        holds=(hold,),
        data={"created": created},
    )


# --------------------------------------------------------------------------- prepare


def prepare(
    op: Operation | None,
    input_hash: str,
    processing_version: str,
    *,
    operation_id: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Change:
    """Record the input and version without claiming; idempotent for the same values."""
    if op is None:
        created = Operation(
            operation_id, State.PREPARED, input_hash, processing_version, max_attempts=max_attempts
        )
        return Change(None, created, "prepared")
    if op.input_hash != input_hash:
        raise IllegalTransition(
            f"operation {operation_id} records another input", code="input_mismatch"
        )
    if op.processing_version != processing_version:
        raise IllegalTransition(
            f"operation {operation_id} records another processing version", code="version_mismatch"
        )
    return Change(None, None, None)


# --------------------------------------------------------------------------- outcome


def confirm(op: Operation, receipt: str, holds: list[OpenHold]) -> Change:
    """The workflow reports the target's receipt for the current attempt."""
    if op.state is State.CONFIRMED:
        if receipt == op.receipt:
            return Change(None, None, None, receipt=op.receipt)
        return Change(
            None,
            None,
            "receipt_conflict",
            receipt=op.receipt,
            holds=(
                NewHold.of(
                    Reason.RECEIPT_CONFLICT,
                    f"receipt_conflict:{op.operation_id}:{receipt}",
                    f"second receipt {receipt!r} differs from {op.receipt!r}: "
                    "possible duplicate effect",
                ),
            ),
            data={"receipt": receipt},
        )
    if op.state is State.DISPATCHING:
        outcome_holds = tuple(h.hold_id for h in holds if h.reason in OUTCOME_REASONS)
        return Change(
            None,
            replace(op, state=State.CONFIRMED, receipt=receipt),
            "confirmed",
            receipt=receipt,
            resolve_holds=outcome_holds,
            resolution=Resolution.CONFIRMED_BY_RECEIPT if outcome_holds else None,
            data={"attempt": op.attempt},
        )
    if op.state in (State.FAILED, State.CANCELLED):
        # A receipt after a rejection or a cancellation: the effect happened after all.
        return Change(
            None,
            None,
            "receipt_conflict",
            holds=(
                NewHold.of(
                    Reason.RECEIPT_CONFLICT,
                    f"receipt_conflict:{op.operation_id}:{receipt}",
                    f"receipt {receipt!r} arrived for an operation in state {op.state.value}",
                ),
            ),
            data={"receipt": receipt},
        )
    raise IllegalTransition(
        f"operation {op.operation_id} is {op.state.value}; only a dispatched operation "
        "can be confirmed"
    )


def fail(op: Operation, outcome: FailOutcome, error: str) -> Change:
    """The workflow reports that its write failed, or that it cannot tell."""
    if op.state is not State.DISPATCHING:
        raise IllegalTransition(
            f"operation {op.operation_id} is {op.state.value}; only a dispatched operation can fail"
        )
    if outcome is FailOutcome.REJECTED:
        return Change(
            None,
            replace(op, state=State.FAILED),
            "failed",
            data={"attempt": op.attempt, "outcome": outcome.value},
        )
    return Change(
        None,
        None,
        "failed_unknown",
        holds=(unknown_outcome_hold(op, error),),
        data={"attempt": op.attempt, "outcome": outcome.value},
    )


def unknown_outcome_hold(op: Operation, detail: str) -> NewHold:
    return NewHold.of(
        Reason.UNKNOWN_OUTCOME, f"unknown_outcome:{op.operation_id}:{op.attempt}", detail
    )


def execution_failed_hold(op: Operation, execution_id: str, detail: str) -> NewHold:
    return NewHold.of(
        Reason.EXECUTION_FAILED,
        f"execution_failed:{op.operation_id}:{op.attempt}:{execution_id}",
        detail,
    )


def is_overdue(deadline: datetime, now: datetime) -> bool:
    """A deadline is missed from its very instant on. Every screen, report and count uses this;
    the sweep's and the queue's SQL say the same with ``deadline <= now``."""
    return deadline <= now


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
            "hold_resolved",
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
        "hold_resolved",
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
        "hold_resolved",
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
        "hold_resolved",
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
    return Change(
        None, None, "hold_resolved", resolve_holds=(hold.hold_id,), resolution=Resolution.DISMISSED
    )


@dataclass(frozen=True)
class HoldDeadlines:
    """How long a person has to act on a new hold: less when it blocks the workflow."""

    blocking: timedelta = DEFAULT_BLOCKING_HOLD_DEADLINE
    other: timedelta = DEFAULT_HOLD_DEADLINE

    def of(self, opened_at: datetime, reason: Reason) -> datetime:
        return opened_at + (self.blocking if reason in BLOCKING_REASONS else self.other)
