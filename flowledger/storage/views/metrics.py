"""Reads for the scrape-time gauges that no other view answers."""

from __future__ import annotations

import sqlalchemy as sa

from flowledger.storage.models import Outbox, table
from flowledger.storage.views import Connection

OUTBOX = table(Outbox)


def alerts_pending(conn: Connection) -> int:
    """Alerts in the outbox not yet delivered."""
    return int(
        conn.execute(sa.select(sa.func.count()).where(OUTBOX.c.delivered_at.is_(None))).scalar_one()
    )
