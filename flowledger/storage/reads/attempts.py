"""Reads of the attempts (each dispatch of an operation) and the receipts that confirmed
them."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Attempt, Operation, Receipt, table
from flowledger.storage.reads import Connection, row_dict

ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)
OPS = table(Operation)


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


def by_execution(
    conn: Connection, external_id: str, source: str | None, *, limit: int
) -> list[dict[str, Any]]:
    """The dispatches an execution made (the ``attempts.execution_id`` index), newest first,
    with their operation's state now; an attempt that names no source matches any."""
    stmt = (
        sa.select(ATTEMPTS, OPS.c.state.label("operation_state"))
        .join(OPS, OPS.c.operation_id == ATTEMPTS.c.operation_id)
        .where(ATTEMPTS.c.execution_id == external_id)
        .order_by(ATTEMPTS.c.dispatched_at.desc(), ATTEMPTS.c.id.desc())
        .limit(limit)
    )
    if source is not None:
        stmt = stmt.where(sa.or_(ATTEMPTS.c.source.is_(None), ATTEMPTS.c.source == source))
    return [row_dict(r) for r in conn.execute(stmt)]
