"""Reads of an operation's attempts (each dispatch of it) and the receipts that confirmed
them. An execution's attempts are
:func:`~flowledger.storage.reads.execution_copies.attempts_by_execution`'s."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Attempt, Receipt, table
from flowledger.storage.reads import Connection

ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)


def of_operation(conn: Connection, operation_id: str) -> list[Any]:
    return list(
        conn.execute(
            sa.select(ATTEMPTS)
            .where(ATTEMPTS.c.operation_id == operation_id)
            .order_by(ATTEMPTS.c.number)
        ).all()
    )


def receipts_of(conn: Connection, operation_id: str) -> list[Any]:
    return list(
        conn.execute(
            sa.select(RECEIPTS)
            .where(RECEIPTS.c.operation_id == operation_id)
            .order_by(RECEIPTS.c.id)
        ).all()
    )
