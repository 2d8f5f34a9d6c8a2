"""Hourly clean-up: expired idempotency keys, and alerts delivered long ago.

Neither is ledger history (the events are): an idempotency key only guards a client's retries
for its time to live, and a delivered outbox row only guards against sending twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from ledger.storage.engine import Store
from ledger.storage.models import IdempotencyKey, Outbox, table
from ledger.writer.services import Clock, utcnow

KEYS = table(IdempotencyKey)
OUTBOX = table(Outbox)
KEEP_DELIVERED = timedelta(days=7)
BATCH = 1000


@dataclass(frozen=True)
class Cleaned:
    idempotency_keys: int
    delivered_alerts: int


def expire_idempotency_keys(store: Store, clock: Clock = utcnow, batch: int = BATCH) -> int:
    """Delete the keys past ``expires_at`` (indexed), ``batch`` rows per transaction."""
    removed = 0
    while True:
        with store.engine.begin() as conn:
            now = clock()
            doomed = conn.execute(
                sa.select(KEYS.c.token_id, KEYS.c.key)
                .where(KEYS.c.expires_at <= now)
                .order_by(KEYS.c.expires_at)
                .limit(batch)
            ).all()
            if doomed:
                conn.execute(
                    KEYS.delete().where(
                        sa.tuple_(KEYS.c.token_id, KEYS.c.key).in_([tuple(r) for r in doomed])
                    )
                )
        removed += len(doomed)
        if len(doomed) < batch:
            return removed


def purge_delivered_alerts(store: Store, clock: Clock = utcnow) -> int:
    with store.engine.begin() as conn:
        done = conn.execute(
            OUTBOX.delete().where(
                OUTBOX.c.delivered_at.is_not(None),
                OUTBOX.c.delivered_at <= clock() - KEEP_DELIVERED,
            )
        )
    return int(done.rowcount)


def clean(store: Store, clock: Clock = utcnow) -> Cleaned:
    return Cleaned(expire_idempotency_keys(store, clock), purge_delivered_alerts(store, clock))
