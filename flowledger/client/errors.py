"""What the client raises: one base class, so ``except LedgerError`` catches every refusal."""

from __future__ import annotations


class LedgerError(Exception):
    """The ledger refused a call, answered something unusable, or could not be reached (after
    the retries). ``status``, ``code`` and ``field`` are the ledger's own when it answered."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field


class InvalidCall(LedgerError, ValueError):
    """A call refused before it was sent: an operation id built from a missing value, an
    empty execution id or version, a receipt that names nothing. Nothing reached the ledger."""


class Held(LedgerError):
    """The ledger answered ``hold``: nothing may be written until a person decides.
    ``reason`` is the hold's reason (``input_mismatch``, ``unknown_outcome``, ``in_flight``…);
    ``hold_id`` the open hold of that reason when the token may read it, else ``None``."""

    def __init__(self, operation_id: str, reason: str, hold_id: int | None = None) -> None:
        where = f" (hold {hold_id})" if hold_id is not None else ""
        super().__init__(f"flowledger holds {operation_id}: {reason}{where}", code=reason)
        self.operation_id = operation_id
        self.reason = reason
        self.hold_id = hold_id


class ReceiptConflict(LedgerError):
    """The confirm named another receipt than the one recorded: a possible duplicate write,
    held by the ledger for a person."""


class Unfinished(LedgerError):
    """A guarded block that was told ``go`` ended without ``confirm`` or ``fail``; the client
    recorded the outcome as unknown, so a person looks."""


class Rejected(Exception):
    """Raise it (or a subclass) inside a guarded block when the target refused the write and
    nothing happened: the client records ``fail`` as ``rejected`` (the operation may be
    dispatched again) and lets the exception through. Every other exception after ``go`` is
    recorded as ``unknown``: the write may have happened."""
