"""What a sync writes, always inside the caller's transaction: execution copies, the source's
position and health, ``gone_at`` marks, and ``execution_linked`` events.

An execution is linked to an operation when one of the operation's attempts carries its id
(the workflow sent ``execution_id`` with dispatch), when it retried such an execution
(``retryOf``, followed up the chain: a retry may write again without dispatching), or when it
declared the operation itself (n8n ``customData``). Each link is an event, written once: the
event log is where links are looked up.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from connectors.base import ExecutionRecord
from ledger.models import Attempt, Event, Execution, Operation, Source, table
from ledger.services import Tx

EXECUTIONS = table(Execution)
SOURCES = table(Source)
ATTEMPTS = table(Attempt)
EVENTS = table(Event)
OPS = table(Operation)

FIELDS = (
    "workflow_id",
    "workflow_name",
    "status",
    "mode",
    "final",
    "started_at",
    "stopped_at",
    "retry_of",
    "retry_success_id",
    "wait_till",
)
MAX_CHAIN = 20


@dataclass
class Written:
    new: int = 0
    changed: int = 0
    linked: int = 0


def _values(record: ExecutionRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in FIELDS}
    extra = dict(record.extra)
    if record.operation_id:
        extra["operation_id"] = record.operation_id
    values["extra"] = json.dumps(extra, sort_keys=True)[:8000] if extra else None
    return values


def store_records(tx: Tx, source: str, records: Sequence[ExecutionRecord]) -> Written:
    """Insert new copies, update changed ones (a copy the tool shows again is no longer
    gone), and link them. Records repeated in one batch count once, the last one winning."""
    latest = {r.external_id: r for r in records}
    out = Written()
    if not latest:
        return out
    existing = {
        row.external_id: row
        for row in tx.conn.execute(
            sa.select(EXECUTIONS).where(
                EXECUTIONS.c.source == source, EXECUTIONS.c.external_id.in_(list(latest))
            )
        )
    }
    inserts = []
    seen = [row.id for row in existing.values()]
    if seen:
        tx.conn.execute(
            EXECUTIONS.update().where(EXECUTIONS.c.id.in_(seen)).values(last_seen_at=tx.now)
        )
    for ext_id, record in latest.items():
        values = _values(record)
        row = existing.get(ext_id)
        if row is None:
            inserts.append(
                {
                    "source": source,
                    "external_id": ext_id,
                    "first_seen_at": tx.now,
                    "last_seen_at": tx.now,
                    **values,
                }
            )
            continue
        changed = row.gone_at is not None or any(
            getattr(row, k) != v for k, v in values.items() if k != "extra"
        )
        if changed or (values["extra"] is not None and values["extra"] != row.extra):
            out.changed += 1
            tx.conn.execute(
                EXECUTIONS.update().where(EXECUTIONS.c.id == row.id).values(gone_at=None, **values)
            )
    if inserts:
        tx.conn.execute(EXECUTIONS.insert(), inserts)
        out.new = len(inserts)
    out.linked = link(tx, source, list(latest.values()))
    return out


def mark_gone(tx: Tx, row_ids: Sequence[int]) -> int:
    if not row_ids:
        return 0
    done = tx.conn.execute(
        EXECUTIONS.update()
        .where(EXECUTIONS.c.id.in_(list(row_ids)), EXECUTIONS.c.gone_at.is_(None))
        .values(gone_at=tx.now)
    )
    return int(done.rowcount or 0)


def mark_gone_by_id(tx: Tx, source: str, external_ids: Sequence[str]) -> int:
    if not external_ids:
        return 0
    done = tx.conn.execute(
        EXECUTIONS.update()
        .where(
            EXECUTIONS.c.source == source,
            EXECUTIONS.c.external_id.in_(list(external_ids)),
            EXECUTIONS.c.gone_at.is_(None),
        )
        .values(gone_at=tx.now)
    )
    return int(done.rowcount or 0)


# ---------------------------------------------------------------------- links


def link(tx: Tx, source: str, records: Sequence[ExecutionRecord]) -> int:
    """Write one ``execution_linked`` event per (operation, execution) not linked before."""
    found: list[tuple[str, ExecutionRecord, dict[str, Any]]] = []
    for op, record in _by_attempt(tx.conn, source, records):
        found.append((op, record, {"via": "attempt"}))
    for op, record, origin in _by_retry(tx.conn, source, records):
        found.append((op, record, {"via": "retry_of", "origin": origin}))
    declared = {r.operation_id for r in records if r.operation_id}
    if declared:
        known = set(
            tx.conn.execute(
                sa.select(OPS.c.operation_id).where(OPS.c.operation_id.in_(list(declared)))
            ).scalars()
        )
        for record in records:
            if record.operation_id is not None and record.operation_id in known:
                found.append((record.operation_id, record, {"via": "custom_data"}))
    if not found:
        return 0
    done = _linked(tx.conn, {op for op, _, _ in found})
    count = 0
    for op, record, how in found:
        key = (op, source, record.external_id)
        if key in done:
            continue
        done.add(key)
        tx.event(
            "execution_linked",
            op,
            {
                "source": source,
                "execution_id": record.external_id,
                "workflow_id": record.workflow_id,
                "status": record.status,
                **how,
            },
        )
        count += 1
    return count


def _matches(row: Any, source: str, workflow_id: str | None) -> bool:
    """An attempt names its source and workflow when the workflow sent them; when it did,
    they must agree (execution ids repeat across tool instances)."""
    if row.source is not None and row.source != source:
        return False
    return not (row.workflow_id and workflow_id and row.workflow_id != workflow_id)


def _attempts(conn: sa.Connection, execution_ids: set[str]) -> list[Any]:
    if not execution_ids:
        return []
    return list(
        conn.execute(
            sa.select(
                ATTEMPTS.c.operation_id,
                ATTEMPTS.c.execution_id,
                ATTEMPTS.c.source,
                ATTEMPTS.c.workflow_id,
            ).where(ATTEMPTS.c.execution_id.in_(sorted(execution_ids)))
        )
    )


def _by_attempt(
    conn: sa.Connection, source: str, records: Sequence[ExecutionRecord]
) -> list[tuple[str, ExecutionRecord]]:
    by_id = {r.external_id: r for r in records}
    out = []
    for row in _attempts(conn, set(by_id)):
        record = by_id[row.execution_id]
        if _matches(row, source, record.workflow_id):
            out.append((row.operation_id, record))
    return out


def _by_retry(
    conn: sa.Connection, source: str, records: Sequence[ExecutionRecord]
) -> list[tuple[str, ExecutionRecord, str]]:
    """Operations dispatched by any execution up the ``retryOf`` chain of a record."""
    out = []
    batch = {r.external_id: r for r in records}
    for record in records:
        chain: list[str] = []
        parent = record.retry_of
        while parent and parent not in chain and len(chain) < MAX_CHAIN:
            chain.append(parent)
            upper = batch.get(parent)
            if upper is not None:
                parent = upper.retry_of
                continue
            parent = conn.execute(
                sa.select(EXECUTIONS.c.retry_of).where(
                    EXECUTIONS.c.source == source, EXECUTIONS.c.external_id == parent
                )
            ).scalar_one_or_none()
        for row in _attempts(conn, set(chain)):
            if _matches(row, source, record.workflow_id):
                out.append((row.operation_id, record, row.execution_id))
    return out


def _linked(conn: sa.Connection, operation_ids: set[str]) -> set[tuple[str, str, str]]:
    rows = conn.execute(
        sa.select(EVENTS.c.operation_id, EVENTS.c.data).where(
            EVENTS.c.kind == "execution_linked",
            EVENTS.c.operation_id.in_(sorted(operation_ids)),
        )
    )
    done = set()
    for op, data in rows:
        d = json.loads(data)
        done.add((op, d.get("source"), d.get("execution_id")))
    return done


# ---------------------------------------------------------------------- sources


def ensure_source(tx: Tx, name: str, kind: str, base_url: str) -> Any:
    row = tx.conn.execute(sa.select(SOURCES).where(SOURCES.c.name == name)).first()
    if row is None:
        tx.conn.execute(SOURCES.insert().values(name=name, kind=kind, base_url=base_url))
        return tx.conn.execute(sa.select(SOURCES).where(SOURCES.c.name == name)).one()
    if (row.kind, row.base_url) != (kind, base_url):
        tx.conn.execute(
            SOURCES.update().where(SOURCES.c.name == name).values(kind=kind, base_url=base_url)
        )
    return row


def save_position(tx: Tx, name: str, position: str, expected: str | None) -> bool:
    """Move the source's position from ``expected`` to ``position``; ``False`` when another
    sync of the same source moved it first (the row lock also orders their page writes)."""
    done = tx.conn.execute(
        SOURCES.update()
        .where(SOURCES.c.name == name, SOURCES.c.position.is_not_distinct_from(expected))
        .values(position=position, last_sync_at=tx.now)
    )
    return done.rowcount == 1


def record_outcome(tx: Tx, name: str, *, status: str, error: str | None) -> None:
    values: dict[str, Any] = {"status": status, "last_sync_at": tx.now}
    if error is None:
        values.update(last_success_at=tx.now, last_error=None)
    else:
        values.update(last_error=error[:2000], last_error_at=tx.now)
    tx.conn.execute(SOURCES.update().where(SOURCES.c.name == name).values(**values))
