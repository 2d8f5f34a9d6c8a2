"""Queueing a published chain head to the alert URLs: outbox rows, each at most once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Outbox, table

OUTBOX = table(Outbox)


def queue_new(conn: sa.Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert the outbox ``rows`` whose ``delivery_id`` is not queued yet (a head published
    again after a crash keeps the row it had)."""
    taken = set(
        conn.execute(
            sa.select(OUTBOX.c.delivery_id).where(
                OUTBOX.c.delivery_id.in_([r["delivery_id"] for r in rows])
            )
        ).scalars()
    )
    fresh = [r for r in rows if r["delivery_id"] not in taken]
    if fresh:
        conn.execute(OUTBOX.insert(), fresh)
