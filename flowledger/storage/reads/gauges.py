"""Reads for the scrape-time gauges that no other read answers: every source with where its
sync stands, and the alerts not yet delivered, in one read."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Outbox, table
from flowledger.storage.reads import sources

OUTBOX = table(Outbox)


def sources_and_alerts(store: Store) -> tuple[list[Any], int]:
    """Every source by name, and how many alerts in the outbox are not yet delivered."""
    pending = sa.select(sa.func.count()).where(OUTBOX.c.delivered_at.is_(None))
    with store.reader.connect() as conn:
        return sources.by_name(conn), int(conn.execute(pending).scalar_one())
