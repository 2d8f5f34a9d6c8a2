"""What happened during a shift, and what is about to need someone: the reads behind the
handover report (:mod:`flowledger.reports.handover` writes it) beyond the open holds' queue.
The holds resolved, the holds opened and the holds extended or reassigned during a shift,
the operations in flight with no hold yet, the receipts confirmed operations hold, and the
alerts not delivered yet. Each is bounded by a ``limit``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Hold, Operation, Outbox, table
from flowledger.storage.reads import Connection, row_dict
from flowledger.storage.reads.event_log import event_dict

HOLDS = table(Hold)
OPS = table(Operation)
EVENTS = table(Event)
OUTBOX = table(Outbox)


def _opened(conn: Connection, since: datetime, until: datetime, *, limit: int) -> list[Any]:
    """Holds opened in ``[since, until)``, oldest first."""
    stmt = (
        sa.select(HOLDS)
        .where(HOLDS.c.opened_at >= since, HOLDS.c.opened_at < until)
        .order_by(HOLDS.c.opened_at, HOLDS.c.id)
        .limit(limit)
    )
    return [row_dict(r) for r in conn.execute(stmt)]


def _events_of_kinds(
    conn: Connection, kinds: Sequence[str], since: datetime, until: datetime, *, limit: int
) -> list[Any]:
    """Events of ``kinds`` in ``[since, until)``, in order. (The log has no index on its
    time: this reads the log once, for a report written once a shift.)"""
    stmt = (
        sa.select(EVENTS)
        .where(EVENTS.c.kind.in_(kinds), EVENTS.c.at >= since, EVENTS.c.at < until)
        .order_by(EVENTS.c.seq)
        .limit(limit)
    )
    return list(conn.execute(stmt).all())


def _dispatching_unheld(conn: Connection, *, limit: int) -> list[dict[str, Any]]:
    """Operations ``dispatching`` with no open hold, soonest deadline first (the
    ``(state, deadline)`` index): the sweep holds each as an unknown outcome once its
    deadline passes."""
    held = sa.exists().where(
        HOLDS.c.operation_id == OPS.c.operation_id, HOLDS.c.resolved_at.is_(None)
    )
    stmt = (
        sa.select(OPS)
        .where(OPS.c.state == "dispatching", ~held)
        .order_by(OPS.c.deadline, OPS.c.operation_id)
        .limit(limit)
    )
    return [row_dict(r) for r in conn.execute(stmt)]


def _receipts_now(conn: Connection, operation_ids: Sequence[str]) -> dict[str, str | None]:
    """Each operation's receipt now."""
    if not operation_ids:
        return {}
    stmt = sa.select(OPS.c.operation_id, OPS.c.receipt).where(
        OPS.c.operation_id.in_(sorted(set(operation_ids)))
    )
    return {str(op): receipt for op, receipt in conn.execute(stmt)}


def _undelivered(conn: Connection, *, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """How many alerts are not delivered yet, and the oldest ``limit`` of them."""
    waiting = OUTBOX.c.delivered_at.is_(None)
    count = int(conn.execute(sa.select(sa.func.count()).where(waiting)).scalar_one())
    stmt = sa.select(OUTBOX).where(waiting).order_by(OUTBOX.c.created_at, OUTBOX.c.id).limit(limit)
    return count, [row_dict(r) for r in conn.execute(stmt)]


LIMIT = 200  # rows a section lists; its heading says when there were more
CHANGES = ("hold_extended", "hold_assigned")
CONFIRMING = ("confirmed_with_evidence", "confirmed_by_receipt")


@dataclass(frozen=True)
class Activity:
    opened: list[dict[str, Any]]
    changes: list[dict[str, Any]]  # hold_extended / hold_assigned events
    in_flight: list[dict[str, Any]]  # dispatching with no open hold
    alerts_waiting: int
    alerts: list[dict[str, Any]]  # the oldest undelivered, each with its hold and receiver


def activity(store: Store, since: datetime, until: datetime) -> Activity:
    with store.reader.connect() as conn:
        opened = _opened(conn, since, until, limit=LIMIT)
        found = _events_of_kinds(conn, CHANGES, since, until, limit=LIMIT)
        in_flight = _dispatching_unheld(conn, limit=LIMIT)
        waiting, alerts = _undelivered(conn, limit=LIMIT)
    return Activity(opened, [event_dict(e) for e in found], in_flight, waiting, _alerts(alerts))


def _alerts(outbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each alert's hold and receiver: the receiver by the name the outbox gives it (a hash
    of its URL, which may carry a token; ``flowledger.services.outbox.target_of``)."""
    out = []
    for row in outbox:
        payload = json.loads(row["payload"])
        hold = payload.get("body", {}).get("hold", {})
        receiver = payload.get("target") or "-"
        out.append(
            {**row, "hold_id": hold.get("id"), "reason": hold.get("reason"), "receiver": receiver}
        )
    return out


def receipts(store: Store, resolved: list[dict[str, Any]]) -> dict[int, str | None]:
    """The receipt each confirming resolution left its operation with, by hold id."""
    confirming = [r for r in resolved if r["resolution"] in CONFIRMING and r["operation_id"]]
    with store.reader.connect() as conn:
        now = _receipts_now(conn, [r["operation_id"] for r in confirming])
    return {r["id"]: now.get(r["operation_id"]) for r in confirming}


def resolved_holds(
    store: Store, since: datetime, until: datetime, *, after_id: int = 0, limit: int = 1000
) -> list[dict[str, Any]]:
    """Holds resolved in ``[since, until)``, oldest resolution first, keyset paged by id
    within the window (the ``(resolved_at, deadline)`` index bounds the scan)."""
    stmt = (
        sa.select(HOLDS)
        .where(
            HOLDS.c.resolved_at >= since,
            HOLDS.c.resolved_at < until,
            HOLDS.c.id > after_id,
        )
        .order_by(HOLDS.c.id)
        .limit(limit)
    )
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]
