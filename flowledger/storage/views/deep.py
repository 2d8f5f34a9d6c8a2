"""What ``flowledger verify --deep`` reads: the tables and the events a range of operation
ids at a time (``low < operation_id <= high``, ``None`` an open end), so that memory stays
bounded by a batch, not by the ledger."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Attempt, Event, Hold, Operation, Receipt, table
from flowledger.storage.views import Connection

EVENTS = table(Event)
OPS = table(Operation)
ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)
HOLDS = table(Hold)


def _between(column: Any, low: str | None, high: str | None) -> sa.ColumnElement[bool]:
    """``low < column <= high``; ``None`` leaves that end open (but never lets NULL in)."""
    conds = [column.is_not(None)]
    if low is not None:
        conds.append(column > low)
    if high is not None:
        conds.append(column <= high)
    return sa.and_(*conds)


def _first_ids(conn: Connection, column: Any, low: str | None, batch: int) -> list[str]:
    stmt = sa.select(column).where(_between(column, low, None)).distinct()
    return list(conn.execute(stmt.order_by(column).limit(batch)).scalars().all())


def event_operation_ids(conn: Connection, low: str | None, batch: int) -> list[str]:
    """The first ``batch`` operation ids after ``low`` that events name, in order."""
    return _first_ids(conn, EVENTS.c.operation_id, low, batch)


def operation_ids(conn: Connection, low: str | None, batch: int) -> list[str]:
    """The first ``batch`` ids of the operations table after ``low``, in order."""
    return _first_ids(conn, OPS.c.operation_id, low, batch)


def events_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    """The events of the operations in the range, in chain order."""
    where = _between(EVENTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(EVENTS).where(where).order_by(EVENTS.c.seq)))


def events_of_unowned_holds(conn: Connection) -> Iterator[Any]:
    """The events about holds that concern no operation, in chain order."""
    where = sa.and_(EVENTS.c.operation_id.is_(None), EVENTS.c.hold_id.is_not(None))
    return iter(conn.execute(sa.select(EVENTS).where(where).order_by(EVENTS.c.seq)))


def operations_between(conn: Connection, low: str | None, high: str | None) -> list[Any]:
    return list(conn.execute(sa.select(OPS).where(_between(OPS.c.operation_id, low, high))))


def attempts_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    where = _between(ATTEMPTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(ATTEMPTS).where(where)))


def receipts_between(conn: Connection, low: str | None, high: str | None) -> Iterator[Any]:
    where = _between(RECEIPTS.c.operation_id, low, high)
    return iter(conn.execute(sa.select(RECEIPTS).where(where).order_by(RECEIPTS.c.id)))


def holds_between(conn: Connection, low: str | None, high: str | None) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(_between(HOLDS.c.operation_id, low, high))))


def holds_of_no_operation(conn: Connection) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(HOLDS.c.operation_id.is_(None))))


def holds_by_id(conn: Connection, hold_ids: Sequence[int]) -> list[Any]:
    return list(conn.execute(sa.select(HOLDS).where(HOLDS.c.id.in_(list(hold_ids)))))
