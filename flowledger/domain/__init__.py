"""The ledger's rules as plain functions over plain values.

Nothing here reads a clock, a file, a socket or a database: the caller passes the current time
and the operation as it is stored, and gets back what must change and what to answer. Every
illegal move raises :class:`IllegalTransition`; every legal one returns a value describing the
new state, the holds to open and the event to record, so that storage can write all of it in
one transaction.

The vocabulary and values are in :mod:`.model`, the workflow's moves in :mod:`.rules`, a
person's decisions on holds in :mod:`.resolutions`, the sweep's in :mod:`.staleness`; a hold's
identity in :mod:`.causes`; what the ledger accepts in :mod:`.limits`; canonical JSON and the
hashes in :mod:`.hashing`. The model, rules and resolutions are importable from here.
"""

from flowledger.domain.limits import MAX_ID_LENGTH
from flowledger.domain.model import (
    APPROVAL_REASONS,
    BLOCKING_REASONS,
    DEFAULT_BLOCKING_HOLD_DEADLINE,
    DEFAULT_DISPATCH_DEADLINE,
    DEFAULT_HOLD_DEADLINE,
    DEFAULT_MAX_ATTEMPTS,
    HOLD_REASONS,
    OUTCOME_REASONS,
    PINNED_REASONS,
    UNSENT,
    Approval,
    Change,
    Decision,
    DispatchRequest,
    FailOutcome,
    HoldDeadlines,
    IllegalTransition,
    NewHold,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
    is_overdue,
)
from flowledger.domain.resolutions import (
    DECISIONS,
    allow_attempt,
    allowed,
    cancel,
    confirm_with_evidence,
    dismiss,
    reapprove,
    refusal,
    release_for_retry,
)
from flowledger.domain.rules import (
    confirm,
    dispatch,
    execution_failed_hold,
    fail,
    prepare,
    release_dispatch,
    unknown_outcome_hold,
)

__all__ = [
    "APPROVAL_REASONS",
    "BLOCKING_REASONS",
    "DECISIONS",
    "DEFAULT_BLOCKING_HOLD_DEADLINE",
    "DEFAULT_DISPATCH_DEADLINE",
    "DEFAULT_HOLD_DEADLINE",
    "DEFAULT_MAX_ATTEMPTS",
    "HOLD_REASONS",
    "MAX_ID_LENGTH",
    "OUTCOME_REASONS",
    "PINNED_REASONS",
    "UNSENT",
    "Approval",
    "Change",
    "Decision",
    "DispatchRequest",
    "FailOutcome",
    "HoldDeadlines",
    "IllegalTransition",
    "NewHold",
    "OpenHold",
    "Operation",
    "Reason",
    "Resolution",
    "State",
    "allow_attempt",
    "allowed",
    "cancel",
    "confirm",
    "confirm_with_evidence",
    "dismiss",
    "dispatch",
    "execution_failed_hold",
    "fail",
    "is_overdue",
    "prepare",
    "reapprove",
    "refusal",
    "release_dispatch",
    "release_for_retry",
    "unknown_outcome_hold",
]
