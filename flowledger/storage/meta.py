"""Writes of ``ledger_meta``: facts about the ledger itself."""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa

from flowledger.domain.times import for_machines
from flowledger.storage.engine import Store
from flowledger.storage.models import LedgerMeta, table
from flowledger.storage.reads.meta import (
    ACKNOWLEDGED,
    BACKUP_OF,
    RESTORED,
    database_identity,
    restored_from,
)

META = table(LedgerMeta)


def mark_demo(store: Store) -> None:
    """Say that ``flowledger demo`` built this ledger (its data is made up)."""
    with store.engine.begin() as conn:
        conn.execute(META.insert().values(key="demo", value="sample data, not real"))


def clear_restored(conn: sa.Connection, by: str, at: datetime) -> datetime | None:
    """Take the mark of a restore off the ledger (``flowledger restored --ack``), keeping who
    acknowledged it and when (:data:`~flowledger.storage.reads.meta.ACKNOWLEDGED`); returns
    when the backup it was restored from was taken, or None: not restored."""
    taken = restored_from(conn)
    if taken is not None:
        conn.execute(META.delete().where(META.c.key.in_((RESTORED, BACKUP_OF, ACKNOWLEDGED))))
        facts = {"backup_taken_at": for_machines(taken), "by": by, "at": for_machines(at)}
        conn.execute(META.insert().values(key=ACKNOWLEDGED, value=json.dumps(facts)))
    return taken


def stamp_backup(store: Store, taken_at: datetime) -> None:
    """PostgreSQL, before ``pg_dump`` reads the database: the backup taken of it now
    (:data:`~flowledger.storage.reads.meta.BACKUP_OF`), which the dump carries."""
    with store.engine.begin() as conn:
        if restored_from(conn) is not None:
            # Restored and not acknowledged: the dump keeps the earlier record, as it lacks
            # what this ledger lacks.
            return
        value = json.dumps(
            {"taken_at": for_machines(taken_at), "database": database_identity(conn)}
        )
        conn.execute(META.delete().where(META.c.key == BACKUP_OF))
        conn.execute(META.insert().values(key=BACKUP_OF, value=value))
