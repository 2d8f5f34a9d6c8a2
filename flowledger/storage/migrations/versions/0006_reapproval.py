"""Operations keep a person's approval (``flowledger hold ID reapprove``): the version it
approves and until when, standing in for a dispatch's approval that expired or names another
version.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 18:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reapproved_version", sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("reapproved_until", sa.DateTime(timezone=True), nullable=True)
        )
    op.execute("UPDATE ledger_meta SET value = '6' WHERE key = 'schema_version'")


def downgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("reapproved_until")
        batch_op.drop_column("reapproved_version")
    op.execute("UPDATE ledger_meta SET value = '5' WHERE key = 'schema_version'")
