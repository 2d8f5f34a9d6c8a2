"""The witnesses' tables (migration 0008): the checkpoints the ledger signed for its witnesses,
the cosignatures they answered, and what the ledger knows of each witness."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from flowledger.storage.models import _ts


class SignedCheckpoint(SQLModel, table=True):
    """A checkpoint signed for the witnesses; one per (size, root): a rewrite keeps both."""

    __tablename__ = "checkpoints"
    __table_args__ = (sa.UniqueConstraint("size", "root", name="uq_checkpoints_size_root"),)
    id: int | None = Field(default=None, primary_key=True)
    size: int = Field(sa_type=sa.BigInteger, index=True)
    root: bytes = Field(sa_type=sa.LargeBinary(32))
    note: str = Field(sa_type=sa.Text)
    signed_at: datetime = _ts()


class Cosignature(SQLModel, table=True):
    """A witness's cosignature of a checkpoint (C2SP tlog-cosignature), once verified."""

    __tablename__ = "cosignatures"
    checkpoint_id: int = Field(foreign_key="checkpoints.id", primary_key=True)
    witness: str = Field(primary_key=True, max_length=400)  # its vkey
    line: str = Field(sa_type=sa.Text)
    timestamp: int = Field(sa_type=sa.BigInteger)
    received_at: datetime = _ts()


class WitnessState(SQLModel, table=True):
    """Each witness (by vkey): the size it last cosigned, its refusal (an alarm until cleared)."""

    __tablename__ = "witness_states"
    witness: str = Field(primary_key=True, max_length=400)  # the witness's vkey
    url: str = Field(max_length=2000)
    seen_size: int = Field(default=0, sa_type=sa.BigInteger)
    last_error: str | None = Field(default=None, max_length=2000)
    refused_at: datetime | None = _ts(default=None)
    refused_size: int | None = Field(default=None, sa_type=sa.BigInteger)
    refusal: str | None = Field(default=None, max_length=2000)
    updated_at: datetime = _ts()
