"""Idempotency keys as stored: when one has expired, and removing the expired ones.

An expired key counts as never used: the receiver removes it when its key comes back
(:func:`flowledger.receiver.idempotency.keyed`, in the writer's plain SQL: ``expires_at <= now``),
and the hourly housekeeping removes the rest in batches
(:func:`flowledger.scheduled.housekeeping.expire_idempotency_keys`, with :func:`expired`).
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.models import IdempotencyKey, table

KEYS = table(IdempotencyKey)


def expired(now: datetime) -> sa.ColumnElement[bool]:
    """A key expires at its ``expires_at`` instant (indexed)."""
    return KEYS.c.expires_at <= now


def remove_expired(conn: sa.Connection, now: datetime, *, limit: int) -> int:
    """Delete up to ``limit`` expired keys, oldest first; how many went."""
    doomed = conn.execute(
        sa.select(KEYS.c.token_id, KEYS.c.key)
        .where(expired(now))
        .order_by(KEYS.c.expires_at)
        .limit(limit)
    ).all()
    if doomed:
        conn.execute(
            KEYS.delete().where(
                sa.tuple_(KEYS.c.token_id, KEYS.c.key).in_([tuple(r) for r in doomed])
            )
        )
    return len(doomed)
