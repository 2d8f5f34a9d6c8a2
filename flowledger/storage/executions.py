"""What a sync writes and reads of the execution copies, inside the caller's transaction
(or, for the reads between its transactions, a reader connection): copies looked up, added
and changed, ``gone_at`` marks, the reads behind its links, and ANALYZE.

Driver SQL through :class:`Tx` for a page's copies: through SQLAlchemy Core, compiling and
binding each row cost more than storing it (``bench/README.md``, "Reads and sync").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store, first_line
from flowledger.storage.models import Execution, table
from flowledger.storage.sql import Row, in_list
from flowledger.storage.tx import Tx

log = logging.getLogger(__name__)

EXECUTIONS = table(Execution)

# The columns a record from a tool sets (``extra`` apart).
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


# ---------------------------------------------------------------------- copies


def existing(tx: Tx, source: str, external_ids: Sequence[str]) -> dict[str, Row]:
    """The source's copies of ``external_ids`` (id, gone_at, :data:`FIELDS`, extra), by id."""
    where, params = in_list("e", list(external_ids))
    return {
        row.external_id: row
        for row in tx.all(
            f"SELECT id, external_id, gone_at, {', '.join(FIELDS)}, extra FROM executions"
            f" WHERE source = :source AND external_id {where}",
            {"source": source, **params},
        )
    }


def seen(tx: Tx, row_ids: Sequence[int]) -> None:
    """The copies were in what the tool just answered."""
    where, params = in_list("i", list(row_ids))
    tx.execute(
        f"UPDATE executions SET last_seen_at = :now WHERE id {where}",
        {"now": tx.db_now, **params},
    )


def change(tx: Tx, row_id: int, values: dict[str, Any]) -> None:
    """New :data:`FIELDS` and ``extra`` for a copy (no longer gone: the tool showed it)."""
    tx.execute(_UPDATE, {"id": row_id, **values})


def add(tx: Tx, rows: list[dict[str, Any]]) -> None:
    """New copies, each a value for every one of :data:`COLUMNS`."""
    if tx.dialect == "sqlite":  # a call into the process, not a round trip
        tx.many(_INSERT, rows)
    else:
        tx.execute(_INSERT_PG, {c: [row[c] for row in rows] for c in COLUMNS})


def mark_gone_by_id(tx: Tx, source: str, external_ids: Sequence[str]) -> int:
    """``gone_at`` on the source's copies of ``external_ids`` not marked yet; how many."""
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


def insert_rows(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Copies as given, in the caller's transaction (the demo's)."""
    conn.execute(EXECUTIONS.insert(), rows)


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


# ---------------------------------------------------------------------- a run's reads


def unfinished(store: Store, source: str, before: datetime, limit: int) -> list[str]:
    """External ids of the source's copies that were not final, not gone, and last seen
    before ``before``, the longest unseen first."""
    t = EXECUTIONS
    with store.reader.connect() as conn:
        return list(
            conn.execute(
                sa.select(t.c.external_id)
                .where(
                    t.c.source == source,
                    t.c.final.is_(False),
                    t.c.gone_at.is_(None),
                    t.c.last_seen_at < before,
                )
                .order_by(t.c.last_seen_at, t.c.id)
                .limit(limit)
            ).scalars()
        )


def final_after(
    store: Store, source: str, first_seen_before: datetime, after: int, limit: int
) -> list[Any]:
    """``(id, external_id, last_seen_at)`` of the source's final copies not gone and first
    seen before ``first_seen_before``, by id after ``after``."""
    t = EXECUTIONS
    with store.reader.connect() as conn:
        return list(
            conn.execute(
                sa.select(t.c.id, t.c.external_id, t.c.last_seen_at)
                .where(
                    t.c.source == source,
                    t.c.final.is_(True),
                    t.c.gone_at.is_(None),
                    t.c.first_seen_at < first_seen_before,
                    t.c.id > after,
                )
                .order_by(t.c.id)
                .limit(limit)
            ).all()
        )


def kept(store: Store, source: str, external_ids: Sequence[str]) -> set[str]:
    """Which of ``external_ids`` the source has a copy of that is not gone."""
    t = EXECUTIONS
    with store.reader.connect() as conn:
        return set(
            conn.execute(
                sa.select(t.c.external_id).where(
                    t.c.source == source,
                    t.c.external_id.in_(list(external_ids)),
                    t.c.gone_at.is_(None),
                )
            ).scalars()
        )


# ---------------------------------------------------------------------- links


def attempts_of(tx: Tx, execution_ids: Sequence[str]) -> list[Row]:
    """``(operation_id, execution_id, source, workflow_id)`` of the attempts those executions
    made."""
    where, params = in_list("e", list(execution_ids))
    return tx.all(
        "SELECT operation_id, execution_id, source, workflow_id FROM attempts"
        f" WHERE execution_id {where}",
        params,
    )


def retry_of(tx: Tx, source: str, external_id: str) -> str | None:
    """What the source's copy of ``external_id`` retried (None: nothing, or no copy)."""
    row = tx.one(
        "SELECT retry_of FROM executions WHERE source = :source AND external_id = :id",
        {"source": source, "id": external_id},
    )
    return row.retry_of if row is not None else None


def known_operations(tx: Tx, operation_ids: Sequence[str]) -> set[str]:
    """Which of ``operation_ids`` are operations of the ledger."""
    where, params = in_list("o", list(operation_ids))
    rows = tx.all(f"SELECT operation_id FROM operations WHERE operation_id {where}", params)
    return {row.operation_id for row in rows}


def links_of(tx: Tx, operation_ids: Sequence[str]) -> list[Row]:
    """``(operation_id, data)`` of the ``execution_linked`` events of those operations."""
    where, params = in_list("o", list(operation_ids))
    return tx.all(
        "SELECT operation_id, data FROM events WHERE kind = 'execution_linked'"
        f" AND operation_id {where}",
        params,
    )
