"""What a sync writes, always inside the caller's transaction: execution copies (and their
links, see ``links``), the source's position and health, and ``gone_at`` marks."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from flowledger.connectors.base import ExecutionRecord
from flowledger.services.ledger import Tx
from flowledger.storage.engine import Store, first_line
from flowledger.storage.models import Execution, Source, table
from flowledger.storage.sql import in_list
from flowledger.sync import links

log = logging.getLogger(__name__)

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


TIMES = frozenset({"started_at", "stopped_at", "wait_till"})
COLUMNS = ("source", "external_id", *FIELDS, "extra", "first_seen_at", "last_seen_at")
_INSERT = (
    f"INSERT INTO executions ({', '.join(COLUMNS)}) VALUES ({', '.join(':' + c for c in COLUMNS)})"
)
# PostgreSQL: a page's new copies in one statement of arrays, parsed and planned once (an
# ``executemany`` sends, and the server runs, a statement per row).
_PG_TYPES = {
    "final": "boolean",
    **dict.fromkeys((*TIMES, "first_seen_at", "last_seen_at"), "timestamptz"),
}
_INSERT_PG = (
    f"INSERT INTO executions ({', '.join(COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f":{c}::{_PG_TYPES.get(c, 'text')}[]" for c in COLUMNS)
    + ")"
)
_UPDATE = (
    "UPDATE executions SET gone_at = NULL, "
    + ", ".join(f"{c} = :{c}" for c in (*FIELDS, "extra"))
    + " WHERE id = :id"
)


@dataclass
class Written:
    new: int = 0
    changed: int = 0
    linked: int = 0


NAME_LENGTH = 400  # the workflow_name column


def _values(
    record: ExecutionRecord, tx: Tx, redact: dict[str, str], kept_extra: str | None = None
) -> dict[str, Any]:
    """The columns for ``record`` as bound to a statement (times through ``tx.time``), its
    texts redacted (``redact`` remembers each text's redacted form for one page: names
    repeat); what the copy already had in ``extra`` stays unless the record says otherwise (a
    link read once from customData is not lost on a later read). Every ``extra`` value is
    short by construction, far inside the column's 8,000."""

    def clean(text: str) -> str:
        out = redact.get(text)
        if out is None:
            out = redact[text] = tx.redact(text)
        return out

    values = {
        name: tx.time(getattr(record, name)) if name in TIMES else getattr(record, name)
        for name in FIELDS
    }
    if isinstance(record.workflow_name, str):  # a name is free text; ids stay exact
        values["workflow_name"] = clean(record.workflow_name)[:NAME_LENGTH]
    extra = json.loads(kept_extra) if kept_extra else {}
    extra.update(
        (key, clean(value) if isinstance(value, str) else value)
        for key, value in record.extra.items()
    )
    if record.operation_id:
        extra["operation_id"] = record.operation_id
    values["extra"] = json.dumps(extra, sort_keys=True) if extra else None
    return values


def store_records(tx: Tx, source: str, records: Sequence[ExecutionRecord]) -> Written:
    """Insert new copies, update changed ones (a copy the tool shows again is no longer
    gone), and link them. Records repeated in one batch count once, the last one winning.

    Driver SQL, one ``executemany`` for the new copies: through SQLAlchemy Core, compiling
    and binding each row cost more than storing it (``python -m bench.sync``: about half of
    a backfill's time was SQLAlchemy's; see the CHANGELOG for the figures). Values are bound
    as Core binds them (``tx.time``), so a copy compares equal however it was written."""
    latest = {r.external_id: r for r in records}
    out = Written()
    if not latest:
        return out
    where, params = in_list("e", list(latest))
    existing = {
        row.external_id: row
        for row in tx.all(
            f"SELECT id, external_id, gone_at, {', '.join(FIELDS)}, extra FROM executions"
            f" WHERE source = :source AND external_id {where}",
            {"source": source, **params},
        )
    }
    if existing:
        where, params = in_list("i", [row.id for row in existing.values()])
        tx.execute(
            f"UPDATE executions SET last_seen_at = :now WHERE id {where}",
            {"now": tx.db_now, **params},
        )
    redacted: dict[str, str] = {}
    inserts = []
    for ext_id, record in latest.items():
        row = existing.get(ext_id)
        if row is None:
            values = _values(record, tx, redacted)
            values.update(
                source=source,
                external_id=ext_id,
                first_seen_at=tx.db_now,
                last_seen_at=tx.db_now,
            )
            inserts.append(values)
            continue
        values = _values(record, tx, redacted, row.extra)
        if row.gone_at is not None or any(row[k] != v for k, v in values.items()):
            out.changed += 1
            tx.execute(_UPDATE, {"id": row.id, **values})
    if inserts:
        if tx.dialect == "sqlite":  # a call into the process, not a round trip
            tx.many(_INSERT, inserts)
        else:
            tx.execute(_INSERT_PG, {c: [row[c] for row in inserts] for c in COLUMNS})
        out.new = len(inserts)
    out.linked = links.link(tx, source, list(latest.values()))
    return out


def analyze(store: Store) -> None:
    """Fresh planner statistics for the copies, on PostgreSQL: a backfill asks for them as
    the table grows (``flowledger.sync.runner.ANALYZE_AFTER``). SQLite plans the page's lookup
    from its indexes alone. ``SKIP_LOCKED``: a VACUUM or an index build holding the table
    does not hold up the backfill; PostgreSQL says so in a warning, as it does when the
    ledger's user does not own the table, and each warning is logged."""
    if store.dialect != "postgresql":
        return
    warnings: list[str] = []

    def noticed(diag: Any) -> None:
        if diag.severity_nonlocalized == "WARNING":
            warnings.append(str(diag.message_primary))

    try:
        with store.engine.begin() as conn:
            raw: Any = conn.connection.driver_connection
            raw.add_notice_handler(noticed)
            try:
                conn.exec_driver_sql("ANALYZE (SKIP_LOCKED) executions")
            finally:
                raw.remove_notice_handler(noticed)
    except sa.exc.DBAPIError as exc:  # autovacuum, or the administrator, gets to it later
        warnings.append(first_line(exc))
    for warning in warnings:
        log.warning("ANALYZE executions: %s; the sync goes on", warning)


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
    same = "IS" if tx.dialect == "sqlite" else "IS NOT DISTINCT FROM"
    moved = tx.update(
        "UPDATE sources SET position = :position, last_sync_at = :now"
        f" WHERE name = :name AND position {same} :expected",
        {"position": position, "now": tx.db_now, "name": name, "expected": expected},
    )
    return moved == 1


def record_outcome(tx: Tx, name: str, *, status: str, error: str | None) -> None:
    values: dict[str, Any] = {"status": status, "last_sync_at": tx.now}
    if error is None:
        values.update(last_success_at=tx.now, last_error=None)
    else:
        values.update(last_error=tx.redact(error)[:2000], last_error_at=tx.now)
    tx.conn.execute(SOURCES.update().where(SOURCES.c.name == name).values(**values))
