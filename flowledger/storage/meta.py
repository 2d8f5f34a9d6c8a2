"""Writes of ``ledger_meta``: facts about the ledger itself."""

from __future__ import annotations

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import LedgerMeta, table
from flowledger.storage.reads.meta import RESTORED

META = table(LedgerMeta)


def mark_demo(store: Store) -> None:
    """Say that ``flowledger demo`` built this ledger (its data is made up)."""
    with store.engine.begin() as conn:
        conn.execute(META.insert().values(key="demo", value="sample data, not real"))


def clear_restored(conn: sa.Connection) -> str | None:
    """Take the mark of a restore off the ledger (``flowledger restored --ack``); returns
    when the backup it was restored from was taken (as stored), or None: not marked."""
    taken = conn.execute(sa.select(META.c.value).where(META.c.key == RESTORED)).scalar_one_or_none()
    if taken is not None:
        conn.execute(META.delete().where(META.c.key == RESTORED))
    return None if taken is None else str(taken)
