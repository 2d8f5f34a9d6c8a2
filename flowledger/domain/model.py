"""The domain's vocabulary: states, decisions, hold reasons, resolutions, the one error, and
the plain values the rules take and return."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from flowledger.domain.records import direct_init


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
    DUPLICATE_TRIGGER = "duplicate_trigger"
    STALE_WORKFLOW_VERSION = "stale_workflow_version"
    # Answers only: no hold is opened for these.
    IN_FLIGHT = "in_flight"
    CANCELLED = "cancelled"


# Every reason a hold can have, in the order above (the last two are answers only).
HOLD_REASONS = tuple(r for r in Reason if r not in (Reason.IN_FLIGHT, Reason.CANCELLED))

# Holds about what one execution did: while one is open, that execution is kept from its
# tool's pruning (pinned), so its record and node data stay there to be read.
PINNED_REASONS = frozenset(
    {
        Reason.UNKNOWN_OUTCOME,
        Reason.EXECUTION_FAILED,
        Reason.RECEIPT_CONFLICT,
        Reason.INPUT_MISMATCH,
        Reason.EXECUTION_STUCK,
    }
)

BLOCKING_REASONS = frozenset(
    {Reason.UNKNOWN_OUTCOME, Reason.EXECUTION_FAILED, Reason.RECEIPT_CONFLICT}
)

# Holds about "did the write of the current attempt happen?"; resolving the outcome resolves
# all of them at once.
OUTCOME_REASONS = frozenset({Reason.UNKNOWN_OUTCOME, Reason.EXECUTION_FAILED})
# Holds about the approval a dispatch carried; a person's new approval resolves both.
APPROVAL_REASONS = frozenset({Reason.APPROVAL_EXPIRED, Reason.APPROVAL_VERSION})


class FailOutcome(enum.StrEnum):
    REJECTED = "rejected"  # the target said no: nothing was written
    UNKNOWN = "unknown"  # the call died: the write may or may not have happened


class Resolution(enum.StrEnum):
    CONFIRMED_WITH_EVIDENCE = "confirmed_with_evidence"
    RELEASED_FOR_RETRY = "released_for_retry"
    CANCELLED = "cancelled"
    DISMISSED = "dismissed"
    CONFIRMED_BY_RECEIPT = "confirmed_by_receipt"  # the workflow's own late confirm
    REJECTED_BY_TARGET = "rejected_by_target"  # the workflow's own late rejection
    CAUSE_RESOLVED = "cause_resolved"  # an overdue hold whose hold was resolved
    REAPPROVED = "reapproved"  # a person approved the operation again
    ATTEMPT_ALLOWED = "attempt_allowed"  # a person allowed one attempt past max_attempts


class IllegalTransition(Exception):
    """An action that the state machine does not allow from the current state."""

    def __init__(self, message: str, *, code: str = "illegal_transition") -> None:
        super().__init__(message)
        self.code = code


# The outcome of an attempt the workflow released before writing (``release_dispatch``):
# it never reached the target, and does not count against ``max_attempts``.
UNSENT = "unsent"

DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_DISPATCH_DEADLINE = timedelta(minutes=15)
DEFAULT_HOLD_DEADLINE = timedelta(hours=4)
DEFAULT_BLOCKING_HOLD_DEADLINE = timedelta(hours=1)  # the workflow's writes wait meanwhile


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Approval:
    version: str
    expires_at: datetime | None = None


@direct_init
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
    # A person's approval (:func:`flowledger.domain.reapprove`): it stands in for a dispatch's
    # approval that expired or names another version.
    reapproval: Approval | None = None


@dataclass(frozen=True)
class OpenHold:
    hold_id: int
    reason: Reason
    blocking: bool
    cause_key: str


@direct_init
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


@direct_init
@dataclass(frozen=True)
class Change:
    """The outcome of one rule: the operation afterwards (``None`` when unchanged), the answer,
    the holds to open or resolve, the evidence to add to holds already open (each the id of
    the open hold and the hold that would have been opened), and the event to record."""

    decision: Decision | None
    operation: Operation | None
    event: str | None
    reason: Reason | None = None
    receipt: str | None = None
    holds: tuple[NewHold, ...] = ()
    evidence: tuple[tuple[int, NewHold], ...] = ()
    resolve_holds: tuple[int, ...] = ()
    resolution: Resolution | None = None
    new_attempt: bool = False
    data: dict[str, Any] = field(default_factory=dict)


def is_overdue(deadline: datetime, now: datetime) -> bool:
    """A deadline is missed from its very instant on. Every screen, report and count uses this;
    the sweep's and the queue's SQL say the same with ``deadline <= now``."""
    return deadline <= now


@dataclass(frozen=True)
class HoldDeadlines:
    """How long a person has to act on a new hold: less when it blocks the workflow."""

    blocking: timedelta = DEFAULT_BLOCKING_HOLD_DEADLINE
    other: timedelta = DEFAULT_HOLD_DEADLINE

    def of(self, opened_at: datetime, reason: Reason) -> datetime:
        return opened_at + (self.blocking if reason in BLOCKING_REASONS else self.other)
