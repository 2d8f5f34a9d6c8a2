"""What the sync keeps of workflow versions (migration 0010, :mod:`flowledger.storage.versions`):
the version each execution that dispatched an operation ran, and the spans in which the ledger
saw a version of a workflow active."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from flowledger.storage.models import ID, _ts

VERSION = 64  # the longest version id kept (n8n's are UUIDs)


class ExecutionVersion(SQLModel, table=True):
    """An execution linked to an operation by its dispatch: the version of its workflow it ran,
    read once (``read_at``; ``version_id`` stays empty when the tool did not say, or no longer
    had the execution). ``due`` while a dispatch of it is not judged yet; ``judged_attempt``:
    the last attempt row judged."""

    __tablename__ = "execution_versions"
    __table_args__ = (
        sa.UniqueConstraint("source", "external_id", name="uq_execution_versions_execution"),
        sa.Index("ix_execution_versions_due", "source", "due", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=ID)
    external_id: str = Field(max_length=ID)
    workflow_id: str | None = Field(default=None, max_length=ID)
    version_id: str | None = Field(default=None, max_length=VERSION)
    read_at: datetime | None = _ts(default=None)
    due: bool = True
    judged_attempt: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class WorkflowVersion(SQLModel, table=True):
    """A version of a workflow the ledger read active: from ``activated_at`` (the tool's time of
    its last activation) at least until ``seen_at`` (the ledger's last read of it active)."""

    __tablename__ = "workflow_versions"
    __table_args__ = (
        sa.UniqueConstraint(
            "source", "workflow_id", "version_id", "activated_at", name="uq_workflow_versions_span"
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    source: str = Field(max_length=ID)
    workflow_id: str = Field(max_length=ID)
    version_id: str = Field(max_length=VERSION)
    activated_at: datetime = _ts()
    seen_at: datetime = _ts()
