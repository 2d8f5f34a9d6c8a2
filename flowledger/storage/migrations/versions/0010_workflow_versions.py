"""Workflow versions: the version each execution that dispatched an operation ran
(``execution_versions``, read once by id) and the spans in which the sync saw a version of a
workflow active (``workflow_versions``), for the ``stale_workflow_version`` hold.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "execution_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("external_id", sa.String(length=200), nullable=False),
        sa.Column("workflow_id", sa.String(length=200), nullable=True),
        sa.Column("version_id", sa.String(length=64), nullable=True),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("due", sa.Boolean(), nullable=False),
        sa.Column("judged_attempt", sa.Integer(), nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("source", "external_id", name="uq_execution_versions_execution"),
    )
    op.create_index("ix_execution_versions_due", "execution_versions", ["source", "due", "id"])
    op.create_table(
        "workflow_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("workflow_id", sa.String(length=200), nullable=False),
        sa.Column("version_id", sa.String(length=64), nullable=False),
        sa.Column("activated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "source", "workflow_id", "version_id", "activated_at", name="uq_workflow_versions_span"
        ),
    )
    op.execute("UPDATE ledger_meta SET value = '10' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_table("workflow_versions")
    op.drop_index("ix_execution_versions_due", table_name="execution_versions")
    op.drop_table("execution_versions")
    # The revision before this one, whichever the chain names.
    op.execute(
        f"UPDATE ledger_meta SET value = '{int(down_revision)}' WHERE key = 'schema_version'"
    )
