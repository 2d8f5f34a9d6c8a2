"""What a sync writes of its source's row, inside the caller's transaction: the row made on
first sight, the position moved (compare-and-set), and the outcome of a run."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import Source, table
from flowledger.storage.tx import Tx

SOURCES = table(Source)


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
    """How the run ended: ``status``, and its one-line ``error`` (the caller redacted it) when
    it failed."""
    values: dict[str, Any] = {"status": status, "last_sync_at": tx.now}
    if error is None:
        values.update(last_success_at=tx.now, last_error=None)
    else:
        values.update(last_error=error[:2000], last_error_at=tx.now)
    tx.conn.execute(SOURCES.update().where(SOURCES.c.name == name).values(**values))


def insert_rows(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Sources as given, in the caller's transaction (the demo's)."""
    conn.execute(SOURCES.insert(), rows)
