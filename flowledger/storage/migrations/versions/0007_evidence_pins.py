"""Acting back on the workflow tool: the executions to pin while a hold is about them
(``evidence_pins``), and the retries a person asked for when releasing a hold
(``retry_requests``), each a queue the scheduler drains.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "evidence_pins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hold_id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=True),
        sa.Column("execution_id", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(["hold_id"], ["holds.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hold_id"),
    )
    op.create_index("ix_evidence_pins_execution_id", "evidence_pins", ["execution_id"])
    op.create_index("ix_evidence_pins_next_attempt_at", "evidence_pins", ["next_attempt_at"])
    op.create_table(
        "retry_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hold_id", sa.Integer(), nullable=False),
        sa.Column("operation_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=True),
        sa.Column("execution_id", sa.String(length=200), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("asked_by", sa.String(length=200), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("called_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("new_execution_id", sa.String(length=200), nullable=True),
        sa.Column("last_error", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(["hold_id"], ["holds.id"]),
        sa.ForeignKeyConstraint(["operation_id"], ["operations.operation_id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("hold_id"),
    )
    op.create_index("ix_retry_requests_operation_id", "retry_requests", ["operation_id"])
    op.create_index("ix_retry_requests_next_attempt_at", "retry_requests", ["next_attempt_at"])
    op.execute("UPDATE ledger_meta SET value = '7' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_index("ix_retry_requests_next_attempt_at", table_name="retry_requests")
    op.drop_index("ix_retry_requests_operation_id", table_name="retry_requests")
    op.drop_table("retry_requests")
    op.drop_index("ix_evidence_pins_next_attempt_at", table_name="evidence_pins")
    op.drop_index("ix_evidence_pins_execution_id", table_name="evidence_pins")
    op.drop_table("evidence_pins")
    op.execute("UPDATE ledger_meta SET value = '6' WHERE key = 'schema_version'")
