"""Indexes that keep the sweep and the executions list flat as the ledger grows: the sweep
walks operations by (state, time, operation_id) and running executions by (started_at, id),
each batch after the last one's end instead of from the start, and finds the operations in
flight of failed executions by execution id; the executions list reads its
pages through an index on its own order, coalesce(started_at, first_seen_at), id.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_operations_state_deadline_id", "operations", ["state", "deadline", "operation_id"]
    )
    op.create_index(
        "ix_operations_state_updated_id", "operations", ["state", "updated_at", "operation_id"]
    )
    op.create_index(
        "ix_operations_dispatching_execution",
        "operations",
        ["execution_id"],
        sqlite_where=sa.text("state = 'dispatching'"),
        postgresql_where=sa.text("state = 'dispatching'"),
    )
    op.drop_index("ix_operations_state_deadline", table_name="operations")
    op.drop_index("ix_operations_state_updated", table_name="operations")
    op.create_index(
        "ix_executions_final_status_started",
        "executions",
        ["final", "status", "started_at", "id"],
    )
    op.drop_index("ix_executions_final_status", table_name="executions")
    op.create_index(
        "ix_executions_started",
        "executions",
        [sa.text("coalesce(started_at, first_seen_at)"), "id"],
    )
    op.execute("UPDATE ledger_meta SET value = '4' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_index("ix_executions_started", table_name="executions")
    op.create_index("ix_executions_final_status", "executions", ["final", "status"])
    op.drop_index("ix_executions_final_status_started", table_name="executions")
    op.create_index("ix_operations_state_updated", "operations", ["state", "updated_at"])
    op.create_index("ix_operations_state_deadline", "operations", ["state", "deadline"])
    op.drop_index("ix_operations_state_updated_id", table_name="operations")
    op.drop_index("ix_operations_state_deadline_id", table_name="operations")
    op.drop_index("ix_operations_dispatching_execution", table_name="operations")
    op.execute("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")
