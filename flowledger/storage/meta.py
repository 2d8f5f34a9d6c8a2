"""Writes of ``ledger_meta``: facts about the ledger itself."""

from __future__ import annotations

from flowledger.storage.engine import Store
from flowledger.storage.models import LedgerMeta, table

META = table(LedgerMeta)


def mark_demo(store: Store) -> None:
    """Say that ``flowledger demo`` built this ledger (its data is made up)."""
    with store.engine.begin() as conn:
        conn.execute(META.insert().values(key="demo", value="sample data, not real"))
