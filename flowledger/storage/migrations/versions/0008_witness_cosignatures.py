"""Witnesses: the checkpoints the ledger signed and sent to its witnesses, the cosignatures they
answered (C2SP tlog-cosignature), and what the ledger knows of each witness: the size it last
cosigned and a refusal that is evidence of a rewrite, a fork or a restore.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.LargeBinary(32), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("size", "root", name="uq_checkpoints_size_root"),
    )
    op.create_index("ix_checkpoints_size", "checkpoints", ["size"])
    op.create_table(
        "cosignatures",
        sa.Column("checkpoint_id", sa.Integer(), sa.ForeignKey("checkpoints.id"), primary_key=True),
        sa.Column("witness", sa.String(length=400), primary_key=True),
        sa.Column("line", sa.Text(), nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "witness_states",
        sa.Column("witness", sa.String(length=400), primary_key=True),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("seen_size", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.String(length=2000), nullable=True),
        sa.Column("refused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("refused_size", sa.BigInteger(), nullable=True),
        sa.Column("refusal", sa.String(length=2000), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute("UPDATE ledger_meta SET value = '8' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_table("witness_states")
    op.drop_table("cosignatures")
    op.drop_index("ix_checkpoints_size", table_name="checkpoints")
    op.drop_table("checkpoints")
    op.execute("UPDATE ledger_meta SET value = '7' WHERE key = 'schema_version'")
