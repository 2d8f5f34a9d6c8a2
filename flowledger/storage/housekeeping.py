"""The clean-up's deletes of rows that are no ledger history (the events are)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.models import Outbox, table

OUTBOX = table(Outbox)


def delete_delivered_alerts(conn: sa.Connection, before: datetime) -> int:
    """Delete the outbox rows delivered at or before ``before``; how many."""
    done = conn.execute(
        OUTBOX.delete().where(
            OUTBOX.c.delivered_at.is_not(None),
            OUTBOX.c.delivered_at <= before,
        )
    )
    return int(done.rowcount)
