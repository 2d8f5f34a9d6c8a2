"""Housekeeping removes a delivered alert once it is a week old, and never an undelivered one:
the outbox row of an alert not yet sent is the only record that it must still be sent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from flowledger.scheduled.housekeeping import purge_delivered_alerts
from flowledger.storage.engine import Store
from flowledger.storage.models import Outbox, table
from tests.support.builders import T0, FakeClock

OUTBOX = table(Outbox)
WEEK = timedelta(days=7)


def alert(delivery_id: str, **values: Any) -> dict[str, Any]:
    row = {
        "delivery_id": delivery_id,
        "kind": "hold_opened",
        "payload": "{}",
        "created_at": T0 - timedelta(days=60),
        "next_attempt_at": T0 - timedelta(days=60),
        "attempts": 1,
        "delivered_at": None,
        "last_error": None,
    }
    row.update(values)
    return row


def kept(store: Store) -> list[str]:
    with store.reader.connect() as conn:
        return list(conn.execute(sa.select(OUTBOX.c.delivery_id).order_by(OUTBOX.c.id)).scalars())


def test_a_delivered_alert_is_kept_a_week_and_removed_after(store: Store, clock: FakeClock) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            OUTBOX.insert(),
            [
                alert("just-under-a-week", delivered_at=T0 - WEEK + timedelta(microseconds=1)),
                alert("a-week", delivered_at=T0 - WEEK),
                alert("a-month", delivered_at=T0 - timedelta(days=30)),
                alert("yesterday", delivered_at=T0 - timedelta(days=1)),
            ],
        )
    assert purge_delivered_alerts(store, clock) == 2
    assert kept(store) == ["just-under-a-week", "yesterday"]


def test_an_undelivered_alert_is_never_removed_however_old(store: Store, clock: FakeClock) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            OUTBOX.insert(),
            [
                alert("never-sent", attempts=40, last_error="503"),
                alert("not-yet-due", next_attempt_at=T0 + timedelta(hours=1)),
            ],
        )
    clock.advance(days=3650)
    assert purge_delivered_alerts(store, clock) == 0
    assert kept(store) == ["never-sent", "not-yet-due"]
