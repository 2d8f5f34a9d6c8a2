"""The sweep's failed-execution rule walks the failed executions, not the operations in flight.

It walked every operation in ``dispatching`` in (updated_at, operation_id) order and looked up
each one's execution, so its cost grew with the operations in flight, not with the failed
executions it was looking for: with 300,000 in flight and 10,000 failed, 1.5 s of server time
in a first sweep of 9.5 s (``python -m bench.sweep --ops 1000000 --due 100000``). It now walks
this index, failed executions in id order, and finds each one's operations through
``ix_operations_dispatching_execution``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 05:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The same text as ledger.storage.models.FAILED_EXECUTION (a migration keeps its own copy).
FAILED = "status IN ('error', 'crashed') OR (gone_at IS NOT NULL AND final = false)"


def upgrade() -> None:
    op.create_index(
        "ix_executions_failed",
        "executions",
        ["id"],
        sqlite_where=sa.text(FAILED),
        postgresql_where=sa.text(FAILED),
    )
    op.execute("UPDATE ledger_meta SET value = '5' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_index("ix_executions_failed", table_name="executions")
    op.execute("UPDATE ledger_meta SET value = '4' WHERE key = 'schema_version'")
