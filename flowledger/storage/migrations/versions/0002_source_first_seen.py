"""Sources remember when the ledger first saw them: a source that has never synced is counted
stale from then, the same across restarts, lease takeovers and cron runs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 21:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sources", schema=None) as batch_op:
        batch_op.add_column(sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE ledger_meta SET value = '2' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("sources", schema=None) as batch_op:
        batch_op.drop_column("first_seen_at")
    op.execute("UPDATE ledger_meta SET value = '1' WHERE key = 'schema_version'")
