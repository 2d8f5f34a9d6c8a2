"""The records as the API and the CLI read them: one operation with its history, counts by
state and reason, the event log, the kept executions and the sources. Paged from the database
(nothing loads a whole table)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.queries.chain import head
from flowledger.storage.engine import Store
from flowledger.storage.models import (
    Attempt,
    Event,
    Execution,
    Hold,
    Operation,
    Receipt,
    Source,
    table,
)

OPS = table(Operation)
ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)
HOLDS = table(Hold)
EVENTS = table(Event)
EXECUTIONS = table(Execution)
SOURCES = table(Source)


def row_dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


@dataclass(frozen=True)
class OperationDetail:
    operation: dict[str, Any]
    attempts: list[dict[str, Any]]
    receipts: list[dict[str, Any]]
    holds: list[dict[str, Any]]
    events: list[dict[str, Any]]
    executions: list[dict[str, Any]]


def operation_detail(
    store: Store, operation_id: str, *, event_limit: int = 500
) -> OperationDetail | None:
    with store.reader.connect() as conn:
        op = conn.execute(sa.select(OPS).where(OPS.c.operation_id == operation_id)).first()
        if op is None:
            return None
        attempts = conn.execute(
            sa.select(ATTEMPTS)
            .where(ATTEMPTS.c.operation_id == operation_id)
            .order_by(ATTEMPTS.c.number)
        ).all()
        receipts = conn.execute(
            sa.select(RECEIPTS)
            .where(RECEIPTS.c.operation_id == operation_id)
            .order_by(RECEIPTS.c.id)
        ).all()
        holds = conn.execute(
            sa.select(HOLDS).where(HOLDS.c.operation_id == operation_id).order_by(HOLDS.c.id)
        ).all()
        events = conn.execute(
            sa.select(EVENTS)
            .where(EVENTS.c.operation_id == operation_id)
            .order_by(EVENTS.c.seq)
            .limit(event_limit)
        ).all()
        # An attempt that names its source matches only that source's copy: two tools can
        # both have an execution "42".
        refs = {(a.source, a.execution_id) for a in attempts}
        matches = [
            sa.and_(EXECUTIONS.c.external_id == e, *([EXECUTIONS.c.source == s] if s else []))
            for s, e in sorted(refs, key=lambda r: (r[0] or "", r[1]))
        ]
        executions = (
            conn.execute(
                sa.select(EXECUTIONS).where(sa.or_(*matches)).order_by(EXECUTIONS.c.id)
            ).all()
            if matches
            else []
        )
    return OperationDetail(
        operation=row_dict(op),
        attempts=[row_dict(r) for r in attempts],
        receipts=[row_dict(r) for r in receipts],
        holds=[row_dict(r) for r in holds],
        events=[event_dict(r) for r in events],
        executions=[row_dict(r) for r in executions],
    )


def event_dict(row: Any) -> dict[str, Any]:
    d = row_dict(row)
    d["data"] = json.loads(d["data"])
    return d


def list_open_holds(
    store: Store, *, limit: int = 100, offset: int = 0, reason: str | None = None
) -> list[dict[str, Any]]:
    """Open holds, soonest deadline first, with their operation's state and workflow."""
    stmt = (
        sa.select(
            HOLDS, OPS.c.state.label("operation_state"), OPS.c.workflow_id.label("workflow_id")
        )
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(HOLDS.c.resolved_at.is_(None))
        .order_by(HOLDS.c.deadline, HOLDS.c.id)
        .limit(limit)
        .offset(offset)
    )
    if reason is not None:
        stmt = stmt.where(HOLDS.c.reason == reason)
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


@dataclass(frozen=True)
class Status:
    by_state: dict[str, int]
    open_holds: dict[str, int]
    blocking_open: int
    overdue: int
    events: int
    head_hash: str


def status(store: Store, now: datetime) -> Status:
    with store.reader.connect() as conn:
        by_state: dict[str, int] = dict(
            conn.execute(sa.select(OPS.c.state, sa.func.count()).group_by(OPS.c.state)).all()
        )
        open_q = HOLDS.c.resolved_at.is_(None)
        holds: dict[str, int] = dict(
            conn.execute(
                sa.select(HOLDS.c.reason, sa.func.count()).where(open_q).group_by(HOLDS.c.reason)
            ).all()
        )
        blocking = conn.execute(
            sa.select(sa.func.count()).where(open_q, HOLDS.c.blocking.is_(True))
        ).scalar_one()
        overdue = conn.execute(
            sa.select(sa.func.count()).where(open_q, HOLDS.c.deadline <= now)
        ).scalar_one()
        seq, digest = head(conn)
    return Status(by_state, holds, blocking, overdue, seq, digest)


def iter_events(
    store: Store, *, since: datetime | None = None, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Every event in order (from ``since`` when given), fetched ``batch`` at a time."""
    after = 0
    while True:
        stmt = sa.select(EVENTS).where(EVENTS.c.seq > after).order_by(EVENTS.c.seq).limit(batch)
        if since is not None:
            stmt = stmt.where(EVENTS.c.at >= since)
        with store.reader.connect() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            return
        for r in rows:
            yield event_dict(r)
        after = rows[-1].seq


# Executions are listed most recently started first (queued ones by when the ledger first saw
# them): the order of the index ix_executions_started, read backwards.
EXECUTION_TIME = sa.func.coalesce(EXECUTIONS.c.started_at, EXECUTIONS.c.first_seen_at)
EXECUTIONS_ORDER = (EXECUTION_TIME.desc(), EXECUTIONS.c.id.desc())


def list_executions(
    store: Store,
    *,
    source: str | None = None,
    status: str | None = None,
    gone: bool | None = None,
    after: int | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The kept execution copies, most recently started first (queued ones by when the
    ledger first saw them), ``limit`` at a time. Keyset paging: pass the last row's ``id`` as
    ``after`` for the next page. ``gone``: ``True`` only copies the tool no longer has,
    ``False`` only those it still has."""
    stmt = sa.select(EXECUTIONS).order_by(*EXECUTIONS_ORDER).limit(max(1, min(limit, 1000)))
    if source is not None:
        stmt = stmt.where(EXECUTIONS.c.source == source)
    if status is not None:
        stmt = stmt.where(EXECUTIONS.c.status == status)
    if gone is True:
        stmt = stmt.where(EXECUTIONS.c.gone_at.is_not(None))
    elif gone is False:
        stmt = stmt.where(EXECUTIONS.c.gone_at.is_(None))
    with store.reader.connect() as conn:
        if after is not None:
            paged = executions_after(conn, stmt, after)
            if paged is None:
                return []
            stmt = paged
        return [row_dict(r) for r in conn.execute(stmt)]


def executions_after(
    conn: sa.Connection, stmt: sa.Select[Any], after: int
) -> sa.Select[Any] | None:
    """``stmt`` (in :data:`EXECUTIONS_ORDER`) from the execution after ``after`` on; None
    when ``after`` is not there. The time's own bound lets SQLite start the page inside the
    index (it reads a row value over an expression index as no range at all: it scanned
    from the newest, so a page from the middle of 1,000,000 read 500,000 rows)."""
    anchor = conn.execute(sa.select(EXECUTION_TIME).where(EXECUTIONS.c.id == after)).first()
    if anchor is None:
        return None
    return stmt.where(
        anchor[0] >= EXECUTION_TIME,
        sa.tuple_(EXECUTION_TIME, EXECUTIONS.c.id) < sa.tuple_(anchor[0], after),
    )


def list_sources(store: Store) -> list[dict[str, Any]]:
    """Every source the ledger has synced (a handful), with where its sync stands."""
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(sa.select(SOURCES).order_by(SOURCES.c.name))]
