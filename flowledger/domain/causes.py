"""Cause keys: a hold's identity.

The same cause always gives the same key, so the unique ``holds.cause_key`` makes a repeated
rule (a dispatch sent again, the sweep every minute) open nothing twice. Each reason's key is
its prefix and named parts joined by ``:``, in the order :data:`PARTS` gives; the Python rules
build keys with :func:`cause_key`, and the sweep's SQL builds the same text from the same table
(:func:`flowledger.storage.due.sql_cause_key`), pinned by one property test.

The prefixes are stored in every ledger's ``holds`` table: changing one would let a cause that
already has its hold open a second one, so they never change (``approval_version`` keeps the
prefix it had before its reason was named ``approval_version_mismatch``).
"""

from __future__ import annotations

from datetime import datetime

from flowledger.domain.model import NewHold, Reason

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
