"""The queues of what the ledger does in a workflow tool (:mod:`flowledger.storage.acting`):
their tables, beside :mod:`flowledger.storage.models` and on the same metadata."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from flowledger.storage.models import ID, _ts


class EvidencePin(SQLModel, table=True):
    """An execution to keep from its tool's pruning while a hold is about it, queued with the
    hold (one row a hold); the scheduler pins it (``pinned_at``), retrying with backoff. Only a
    person deletes a pinned execution, once its holds are resolved (``deleted_at``)."""

    __tablename__ = "evidence_pins"
    id: int | None = Field(default=None, primary_key=True)
    hold_id: int = Field(foreign_key="holds.id", unique=True)
    source: str | None = Field(default=None, max_length=ID)
    execution_id: str = Field(max_length=ID, index=True)
    created_at: datetime = _ts()
    attempts: int = 0
    next_attempt_at: datetime = _ts(index=True)
    pinned_at: datetime | None = _ts(default=None)
    deleted_at: datetime | None = _ts(default=None)
    last_error: str | None = Field(default=None, max_length=2000)


class RetryRequest(SQLModel, table=True):
    """A person asked, releasing a hold, for its failed execution to run again: one row a hold,
    so a retry is asked once. ``called_at`` is set, and committed, before the tool is called:
    a row found called but not done may have reached the tool, and is looked up there before
    it is ever called again. ``outcome``: ``retried`` (``new_execution_id``) or ``refused``."""

    __tablename__ = "retry_requests"
    id: int | None = Field(default=None, primary_key=True)
    hold_id: int = Field(foreign_key="holds.id", unique=True)
    operation_id: str = Field(foreign_key="operations.operation_id", max_length=ID, index=True)
    source: str | None = Field(default=None, max_length=ID)
    execution_id: str = Field(max_length=ID)
    asked_at: datetime = _ts()
    asked_by: str = Field(max_length=ID)
    attempts: int = 0
    next_attempt_at: datetime = _ts(index=True)
    called_at: datetime | None = _ts(default=None)
    done_at: datetime | None = _ts(default=None)
    outcome: str | None = Field(default=None, max_length=32)
    new_execution_id: str | None = Field(default=None, max_length=ID)
    last_error: str | None = Field(default=None, max_length=2000)
