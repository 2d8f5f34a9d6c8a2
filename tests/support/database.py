"""The database as plain values, for "nothing changed" assertions."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from ledger.storage.engine import Store


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, for "the database did not change" assertions."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.reader.connect() as conn:
        for name, tbl in sorted(SQLModel.metadata.tables.items()):
            rows = conn.execute(sa.select(tbl)).all()
            out[name] = sorted((tuple(r) for r in rows), key=repr)
    return out
