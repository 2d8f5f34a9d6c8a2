"""What a sync writes, always inside the caller's transaction: execution copies (and their
links, see ``links``), the source's position and health, and ``gone_at`` marks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from connectors.base import ExecutionRecord
from ledger.storage.models import Execution, Source, table
from ledger.sync import links
from ledger.writer.services import Tx

EXECUTIONS = table(Execution)
SOURCES = table(Source)

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


@dataclass
class Written:
    new: int = 0
    changed: int = 0
    linked: int = 0


def _values(record: ExecutionRecord, kept_extra: str | None = None) -> dict[str, Any]:
    """The columns for ``record``; what the copy already had in ``extra`` stays unless the
    record says otherwise (a link read once from customData is not lost on a later read).
    Every ``extra`` value is short by construction, far inside the column's 8,000."""
    values = {name: getattr(record, name) for name in FIELDS}
    extra = json.loads(kept_extra) if kept_extra else {}
    extra.update(record.extra)
    if record.operation_id:
        extra["operation_id"] = record.operation_id
    values["extra"] = json.dumps(extra, sort_keys=True) if extra else None
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
        row = existing.get(ext_id)
        if row is None:
            values = _values(record)
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
        values = _values(record, row.extra)
        if row.gone_at is not None or any(getattr(row, k) != v for k, v in values.items()):
            out.changed += 1
            tx.conn.execute(
                EXECUTIONS.update().where(EXECUTIONS.c.id == row.id).values(gone_at=None, **values)
            )
    if inserts:
        tx.conn.execute(EXECUTIONS.insert(), inserts)
        out.new = len(inserts)
    out.linked = links.link(tx, source, list(latest.values()))
    return out


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


# ---------------------------------------------------------------------- sources


def ensure_source(tx: Tx, name: str, kind: str, base_url: str) -> Any:
    """The source's row, made on first sight (with ``first_seen_at``) and kept in step with
    the configured kind and URL."""
    row = tx.conn.execute(sa.select(SOURCES).where(SOURCES.c.name == name)).first()
    if row is None:
        tx.conn.execute(
            SOURCES.insert().values(
                name=name, kind=kind, base_url=base_url, status="new", first_seen_at=tx.now
            )
        )
        return tx.conn.execute(sa.select(SOURCES).where(SOURCES.c.name == name)).one()
    changes: dict[str, Any] = {}
    if (row.kind, row.base_url) != (kind, base_url):
        changes.update(kind=kind, base_url=base_url)
    if row.first_seen_at is None:  # a row from before sources remembered it
        changes["first_seen_at"] = tx.now
    if changes:
        tx.conn.execute(SOURCES.update().where(SOURCES.c.name == name).values(**changes))
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
