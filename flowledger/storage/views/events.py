"""Reads of the event log: an operation's events, the log in order a batch at a time, pages
newest first (keyset on the sequence number, the primary key), and hashes by sequence."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Event, table
from flowledger.storage.views import Connection, contains

EVENTS = table(Event)
_WORD_COLUMNS = (EVENTS.c.kind, EVENTS.c.actor, EVENTS.c.operation_id)


def of_operation(conn: Connection, operation_id: str, *, limit: int) -> list[Any]:
    """The operation's first ``limit`` events, oldest first."""
    return list(
        conn.execute(
            sa.select(EVENTS)
            .where(EVENTS.c.operation_id == operation_id)
            .order_by(EVENTS.c.seq)
            .limit(limit)
        ).all()
    )


def batch_after(conn: Connection, after: int, *, since: datetime | None, batch: int) -> list[Any]:
    """The ``batch`` events after sequence number ``after`` (at or after ``since``)."""
    stmt = sa.select(EVENTS).where(EVENTS.c.seq > after).order_by(EVENTS.c.seq).limit(batch)
    if since is not None:
        stmt = stmt.where(EVENTS.c.at >= since)
    return list(conn.execute(stmt).all())


def newest(
    conn: Connection, top: int, *, bottom: int = 1, words: Sequence[str] = (), limit: int
) -> list[Any]:
    """Events from ``top`` down to ``bottom`` (sequence numbers), newest first, with every
    word in their kind, actor or operation."""
    stmt = sa.select(EVENTS).where(EVENTS.c.seq <= top).order_by(EVENTS.c.seq.desc()).limit(limit)
    if bottom > 1:
        stmt = stmt.where(EVENTS.c.seq >= bottom)
    for word in words:
        stmt = stmt.where(sa.or_(*(contains(col, word) for col in _WORD_COLUMNS)))
    return list(conn.execute(stmt).all())


def of_kind(conn: Connection, operation_id: str, kind: str, *, limit: int) -> list[Any]:
    """The operation's events of one kind, newest first."""
    stmt = (
        sa.select(EVENTS)
        .where(EVENTS.c.operation_id == operation_id, EVENTS.c.kind == kind)
        .order_by(EVENTS.c.seq.desc())
        .limit(limit)
    )
    return list(conn.execute(stmt).all())


def last_seq(conn: Connection) -> int:
    return int(conn.execute(sa.select(sa.func.max(EVENTS.c.seq))).scalar() or 0)


def hashes(conn: Connection, seqs: Sequence[int]) -> dict[int, str]:
    """The hash of each event of ``seqs`` there is."""
    rows = conn.execute(sa.select(EVENTS.c.seq, EVENTS.c.hash).where(EVENTS.c.seq.in_(seqs)))
    return {int(seq): str(digest) for seq, digest in rows}


def of_hold(conn: Connection, hold_id: int, operation_id: str | None, *, limit: int) -> list[Any]:
    """The hold's first ``limit`` events, oldest first: those of its operation (the
    ``operation_id`` index; its events with no operation when it concerns none) that name it."""
    about = (
        EVENTS.c.operation_id.is_(None)
        if operation_id is None
        else EVENTS.c.operation_id == operation_id
    )
    stmt = (
        sa.select(EVENTS)
        .where(about, EVENTS.c.hold_id == hold_id)
        .order_by(EVENTS.c.seq)
        .limit(limit)
    )
    return list(conn.execute(stmt).all())
