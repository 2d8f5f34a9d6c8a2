"""The event log: an operation's events, the log in order a batch at a time, pages newest
first as the person on duty pages through them (keyset on the sequence number, the primary
key; searched by words a window of sequence numbers at a time, with the chain's head it was
read under), what people wrote on a hold, and hashes by sequence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Event, table
from flowledger.storage.reads import Connection, contains, row_dict
from flowledger.storage.reads.chain import head

EVENTS = table(Event)
_WORD_COLUMNS = (EVENTS.c.kind, EVENTS.c.actor, EVENTS.c.operation_id)


def event_dict(row: Any) -> dict[str, Any]:
    """An event row as a dict, its ``data`` read from JSON."""
    d = row_dict(row)
    d["data"] = json.loads(d["data"])
    return d


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


def between(conn: Connection, first: int, last: int) -> list[Any]:
    """The events ``first..last`` by sequence number, in order."""
    stmt = sa.select(EVENTS).where(EVENTS.c.seq.between(first, last)).order_by(EVENTS.c.seq)
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


def _newest(
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


@dataclass(frozen=True)
class EventPage:
    """A page of the event log and the chain's head it was read under. A search by words
    reads a window of sequence numbers (as
    :class:`~flowledger.storage.reads.hold_queue.QueueSearch`): ``resume`` is the ``seq`` the
    next page ends before when the window ended before ``limit`` events matched, and
    ``read`` how many events the window covered."""

    head_seq: int
    head_hash: str
    rows: list[dict[str, Any]]
    resume: dict[str, Any] | None = None
    read: int = 0


def event_page(
    store: Store,
    *,
    before_seq: int | None = None,
    text: str = "",
    limit: int = 200,
    window: int | None = None,
) -> EventPage:
    """The newest events first, keyset paged by sequence number, with the chain's head from
    the same read: the head is read first and no event after it is listed (an event and the
    head that names it are committed together), so a list never runs ahead of its header.
    With words and a ``window``, at most ``window`` events (a range of sequence numbers, the
    primary key) are read: a word that matches nothing answers after one window instead of
    after reading the whole log."""
    words = text.split()
    with store.reader.connect() as conn:
        seq, digest = head(conn)
        top = seq if before_seq is None else min(seq, before_seq - 1)
        windowed = bool(words) and window is not None
        bottom = max(1, top - window + 1) if windowed and window is not None else 1
        found = _newest(conn, top, bottom=bottom, words=words, limit=limit)
        rows = [event_dict(r) for r in found]
    resume = {"seq": bottom} if bottom > 1 and len(rows) < limit else None
    return EventPage(seq, digest, rows, resume, max(0, top - bottom + 1) if windowed else 0)


def recent_events(
    store: Store, *, before_seq: int | None = None, text: str = "", limit: int = 200
) -> list[dict[str, Any]]:
    """The newest events first, keyset paged by sequence number."""
    return event_page(store, before_seq=before_seq, text=text, limit=limit).rows


def hold_notes(
    store: Store, hold_id: int, operation_id: str | None, *, limit: int = 200
) -> list[dict[str, Any]]:
    """What people wrote on a hold, oldest first: each of its first ``limit`` events with a
    note (assigned, extended, noted, resolved), as the event recorded it. Its events are
    those of its operation (the ``operation_id`` index; its events with no operation when it
    concerns none) that name it."""
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
    with store.reader.connect() as conn:
        found = conn.execute(stmt).all()
    return [e for e in (event_dict(r) for r in found) if e["data"].get("note")]
