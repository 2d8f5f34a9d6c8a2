"""The delivery side of the outbox: the rows due to be sent, and what became of a send.

Every update names a row not yet delivered, so a row another deliverer marked meanwhile is left
as it is. (The rows are written with the holds they announce, by the hold writer.)
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Outbox, table

OUTBOX = table(Outbox)


def due(conn: sa.Connection, now: datetime, limit: int) -> Sequence[Any]:
    """Up to ``limit`` undelivered rows due at ``now`` (id, delivery_id, payload, attempts),
    oldest first."""
    return conn.execute(
        sa.select(OUTBOX.c.id, OUTBOX.c.delivery_id, OUTBOX.c.payload, OUTBOX.c.attempts)
        .where(OUTBOX.c.next_attempt_at <= now, OUTBOX.c.delivered_at.is_(None))
        .order_by(OUTBOX.c.next_attempt_at, OUTBOX.c.id)
        .limit(limit)
    ).all()


def mark_delivered(conn: sa.Connection, row_id: int, at: datetime) -> None:
    conn.execute(
        OUTBOX.update()
        .where(OUTBOX.c.id == row_id, OUTBOX.c.delivered_at.is_(None))
        .values(delivered_at=at, attempts=OUTBOX.c.attempts + 1, last_error=None)
    )


def retry_later(
    conn: sa.Connection, row_id: int, *, attempts: int, at: datetime, error: str
) -> None:
    """Leave the row for another try at ``at``, with its count of attempts and last error."""
    conn.execute(
        OUTBOX.update()
        .where(OUTBOX.c.id == row_id, OUTBOX.c.delivered_at.is_(None))
        .values(attempts=attempts, next_attempt_at=at, last_error=error)
    )
