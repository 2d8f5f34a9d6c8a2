"""Reads of the sources (a handful of rows: one per configured workflow-tool instance)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Source, table
from flowledger.storage.reads import Connection

SOURCES = table(Source)


def by_name(conn: Connection) -> list[Any]:
    """Every source the ledger has synced, by name."""
    return list(conn.execute(sa.select(SOURCES).order_by(SOURCES.c.name)).all())
