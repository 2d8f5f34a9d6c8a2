"""Signed requests are accepted once: the receiver keeps each accepted signature until its
timestamp is outside the signing window, and refuses it if it comes again.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seen_signatures",
        sa.Column("signature", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("signature"),
    )
    op.create_index(
        "ix_seen_signatures_expires_at", "seen_signatures", ["expires_at"], unique=False
    )
    op.execute("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_index("ix_seen_signatures_expires_at", table_name="seen_signatures")
    op.drop_table("seen_signatures")
    op.execute("UPDATE ledger_meta SET value = '2' WHERE key = 'schema_version'")
