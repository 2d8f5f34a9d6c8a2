"""Reads for the handover report beyond the queue and the resolutions: the holds opened and
the holds extended or reassigned during a shift, the operations in flight with no hold yet,
the receipts confirmed operations hold, and the alerts not delivered yet. Each is bounded by
a ``limit``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Event, Hold, Operation, Outbox, table
from flowledger.storage.views import Connection, row_dict

HOLDS = table(Hold)
OPS = table(Operation)
EVENTS = table(Event)
OUTBOX = table(Outbox)


def opened(conn: Connection, since: datetime, until: datetime, *, limit: int) -> list[Any]:
    """Holds opened in ``[since, until)``, oldest first."""
    stmt = (
        sa.select(HOLDS)
        .where(HOLDS.c.opened_at >= since, HOLDS.c.opened_at < until)
        .order_by(HOLDS.c.opened_at, HOLDS.c.id)
        .limit(limit)
    )
    return [row_dict(r) for r in conn.execute(stmt)]


def events_of_kinds(
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


def dispatching_unheld(conn: Connection, *, limit: int) -> list[dict[str, Any]]:
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


def receipts(conn: Connection, operation_ids: Sequence[str]) -> dict[str, str | None]:
    """Each operation's receipt now."""
    if not operation_ids:
        return {}
    stmt = sa.select(OPS.c.operation_id, OPS.c.receipt).where(
        OPS.c.operation_id.in_(sorted(set(operation_ids)))
    )
    return {str(op): receipt for op, receipt in conn.execute(stmt)}


def undelivered(conn: Connection, *, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """How many alerts are not delivered yet, and the oldest ``limit`` of them."""
    waiting = OUTBOX.c.delivered_at.is_(None)
    count = int(conn.execute(sa.select(sa.func.count()).where(waiting)).scalar_one())
    stmt = sa.select(OUTBOX).where(waiting).order_by(OUTBOX.c.created_at, OUTBOX.c.id).limit(limit)
    return count, [row_dict(r) for r in conn.execute(stmt)]
