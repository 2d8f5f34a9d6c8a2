"""Reads of the event chain as a whole: its head, a walk of every event in order, and a
connection that sees one moment for all its reads."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import ChainHead, Event, table
from flowledger.storage.views import Connection

EVENTS = table(Event)
HEAD = table(ChainHead)


def head(conn: Connection) -> tuple[int, str]:
    seq, digest = conn.execute(sa.select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)).one()
    return int(seq), str(digest)


def walk(conn: Connection, batch: int) -> Iterator[Any]:
    """Every event in order, read ``batch`` at a time."""
    after = 0
    while True:
        rows = conn.execute(
            sa.select(EVENTS).where(EVENTS.c.seq > after).order_by(EVENTS.c.seq).limit(batch)
        ).all()
        if not rows:
            return
        yield from rows
        after = rows[-1].seq


@contextmanager
def snapshot(store: Store) -> Iterator[Connection]:
    """A read connection that sees the ledger as of one moment for all its statements, so
    that a check made of many reads (the chain walk and its head, a replay and the tables it
    is compared with) never mistakes a write committed half-way through for a difference.
    SQLite's reader runs in one transaction already (``BEGIN``, a WAL snapshot from its first
    read); PostgreSQL reads each statement afresh under its default READ COMMITTED, so the
    connection asks for REPEATABLE READ (one snapshot per transaction), read only."""
    with store.reader.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        yield conn
