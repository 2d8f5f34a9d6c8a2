"""Hourly clean-up: expired idempotency keys, signatures past their window, and alerts
delivered long ago.

None is ledger history (the events are): an idempotency key only guards a client's retries
for its time to live, a seen signature only guards against a replay while the window would
still accept it, and a delivered outbox row only guards against sending twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from flowledger.plumbing.clock import Clock, utcnow
from flowledger.storage import keys, signatures
from flowledger.storage.engine import Store
from flowledger.storage.housekeeping import delete_delivered_alerts

KEEP_DELIVERED = timedelta(days=7)
BATCH = 1000


@dataclass(frozen=True)
class Cleaned:
    idempotency_keys: int
    delivered_alerts: int
    signatures: int


def expire_idempotency_keys(store: Store, clock: Clock = utcnow, batch: int = BATCH) -> int:
    """Delete the keys past ``expires_at``, ``batch`` rows per transaction."""
    removed = 0
    while True:
        with store.engine.begin() as conn:
            gone = keys.remove_expired(conn, clock(), limit=batch)
        removed += gone
        if gone < batch:
            return removed


def expire_signatures(store: Store, clock: Clock = utcnow, batch: int = BATCH) -> int:
    """Delete the seen signatures past their window, ``batch`` rows per transaction."""
    removed = 0
    while True:
        with store.engine.begin() as conn:
            gone = signatures.remove_expired(conn, clock(), limit=batch)
        removed += gone
        if gone < batch:
            return removed


def purge_delivered_alerts(store: Store, clock: Clock = utcnow) -> int:
    with store.engine.begin() as conn:
        return delete_delivered_alerts(conn, clock() - KEEP_DELIVERED)


def clean(store: Store, clock: Clock = utcnow) -> Cleaned:
    return Cleaned(
        expire_idempotency_keys(store, clock),
        purge_delivered_alerts(store, clock),
        expire_signatures(store, clock),
    )
