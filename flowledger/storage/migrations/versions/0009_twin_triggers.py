"""Twin triggers: each operation keeps the last execution that dispatched it (its workflow,
when, and the execution recorded as its twin), and a hold counts its occurrences (a
``duplicate_trigger`` hold, one per workflow and day, counts every twin of that day).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06 11:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_TWINS = "reason = 'duplicate_trigger'"


def upgrade() -> None:
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_execution_id", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("last_workflow_id", sa.String(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("last_dispatched_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("twin_execution_id", sa.String(length=200), nullable=True))
    with op.batch_alter_table("holds", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("occurrences", sa.Integer(), nullable=False, server_default="1")
        )
    op.create_index(
        "ix_holds_duplicate_trigger",
        "holds",
        ["source"],
        sqlite_where=sa.text(_TWINS),
        postgresql_where=sa.text(_TWINS),
    )
    op.execute("UPDATE ledger_meta SET value = '9' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_index("ix_holds_duplicate_trigger", table_name="holds")
    with op.batch_alter_table("holds", schema=None) as batch_op:
        batch_op.drop_column("occurrences")
    with op.batch_alter_table("operations", schema=None) as batch_op:
        batch_op.drop_column("twin_execution_id")
        batch_op.drop_column("last_dispatched_at")
        batch_op.drop_column("last_workflow_id")
        batch_op.drop_column("last_execution_id")
    # The revision before this one, whichever the chain names.
    op.execute(
        f"UPDATE ledger_meta SET value = '{int(down_revision)}' WHERE key = 'schema_version'"
    )
