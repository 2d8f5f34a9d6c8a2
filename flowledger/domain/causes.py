"""Cause keys: a hold's identity.

The same cause always gives the same key, so the unique ``holds.cause_key`` makes a repeated
rule (a dispatch sent again, the sweep every minute) open nothing twice. Each reason's key is
its prefix and named parts joined by ``:``, in the order :data:`PARTS` gives; the Python rules
build keys with :func:`cause_key`, and the sweep's SQL builds the same text from the same table
(:func:`flowledger.storage.due.sql_cause_key`), pinned by one property test.

The prefixes are stored in every ledger's ``holds`` table: changing one would let a cause that
already has its hold open a second one, so they never change (``approval_version`` keeps the
prefix it had before its reason was named ``approval_version_mismatch``).

An operation has at most one open hold per reason: a further cause of a reason whose hold is
open is evidence for that hold (:func:`one_per_reason`, :func:`with_evidence`), not a hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowledger.domain.limits import MAX_HOLD_DETAIL_LENGTH
from flowledger.domain.model import NewHold, OpenHold, Reason

# reason -> (prefix, the parts after it, in order)
PARTS: dict[Reason, tuple[str, tuple[str, ...]]] = {
    Reason.UNKNOWN_OUTCOME: ("unknown_outcome", ("operation_id", "attempt")),
    Reason.EXECUTION_FAILED: ("execution_failed", ("operation_id", "attempt", "execution_id")),
    Reason.RECEIPT_CONFLICT: ("receipt_conflict", ("operation_id", "receipt")),
    Reason.INPUT_MISMATCH: ("input_mismatch", ("operation_id", "input_hash")),
    Reason.VERSION_MISMATCH: ("version_mismatch", ("operation_id", "processing_version")),
    Reason.APPROVAL_EXPIRED: ("approval_expired", ("operation_id", "expires_at")),
    Reason.APPROVAL_VERSION: (
        "approval_version",
        ("operation_id", "approval_version", "processing_version"),
    ),
    Reason.MAX_ATTEMPTS: ("max_attempts", ("operation_id", "attempt")),
    # The attempt tells one prepared spell from the next (a release keeps the attempt it
    # released, a dispatch raises it), so each spell gets its own hold.
    Reason.STALE_PREPARED: ("stale_prepared", ("operation_id", "attempt")),
    Reason.EXECUTION_STUCK: ("execution_stuck", ("source", "execution_id")),
    # One per hold and deadline: extending the deadline lets it fall overdue again.
    Reason.OVERDUE: ("overdue", ("hold_id", "deadline")),
    # One per spell without a successful sync (``since`` is the last success, or "never").
    Reason.SOURCE_STALE: ("source_stale", ("source", "since")),
    # One per workflow and day: a further twin that day counts on it.
    Reason.DUPLICATE_TRIGGER: ("duplicate_trigger", ("source", "workflow_id", "day")),
    # One per workflow and pair of versions (the one run, the one active): a further
    # execution of the pair counts on it.
    Reason.STALE_WORKFLOW_VERSION: (
        "stale_workflow_version",
        ("source", "workflow_id", "ran", "active"),
    ),
}


def part_text(value: str | int | datetime) -> str:
    """How one part is written: a time in ISO 8601, anything else as ``str``."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


_NAMES = {reason: frozenset(names) for reason, (_, names) in PARTS.items()}


def cause_key(reason: Reason, **parts: str | int | datetime) -> str:
    """The key of ``reason`` for these parts; every part :data:`PARTS` names, and no other."""
    prefix, names = PARTS[reason]
    if parts.keys() != _NAMES[reason]:
        raise TypeError(f"{reason.value} cause key takes {names}, got {tuple(parts)}")
    return ":".join([prefix, *[part_text(parts[name]) for name in names]])


def overdue_key_range(hold_id: int) -> tuple[str, str]:
    """The cause keys of every ``overdue`` hold about hold ``hold_id`` lie in
    ``[low, high)``: one per deadline it passed."""
    prefix = cause_key(Reason.OVERDUE, hold_id=hold_id, deadline="")
    return prefix, prefix[:-1] + chr(ord(":") + 1)


def new_hold(reason: Reason, detail: str, **parts: str | int | datetime) -> NewHold:
    """A hold for ``reason``, keyed by these parts (see :func:`cause_key`)."""
    return NewHold.of(reason, cause_key(reason, **parts), detail)


def with_evidence(detail: str, evidence: str) -> str:
    """An open hold's detail once a further cause of its reason adds ``evidence`` to it
    (:func:`one_per_reason`), within the stored length: the writer and the replay of its
    ``hold_evidence`` event both write it so."""
    return f"{detail}; also {evidence}"[:MAX_HOLD_DETAIL_LENGTH]


def one_per_reason(
    hold: NewHold, holds: Sequence[OpenHold]
) -> tuple[tuple[NewHold, ...], tuple[tuple[int, NewHold], ...]]:
    """At most one open hold per reason about an operation: ``hold`` to open, or, when one of
    its reason is open already for another cause, ``hold`` as evidence for that one (a
    person decides the conflict once, and a client sending value after value cannot fill the
    queue and the alerts). A hold of the same cause is left to open, which its cause key
    makes a no-op, as before."""
    if all(h.cause_key != hold.cause_key for h in holds):
        for h in holds:
            if h.reason is hold.reason:
                return (), ((h.hold_id, hold),)
    return (hold,), ()
