"""The holds repository: the writer's statements on holds and the alerts queued with them,
inside the caller's :class:`~flowledger.storage.tx.Tx`.

Holds are opened, closed and decided on by :mod:`flowledger.services.holds`; each function here
is one statement (or one batch of rows).
"""

from __future__ import annotations

from typing import Any

from flowledger.domain import OpenHold, Reason, causes
from flowledger.storage.models import Outbox, table
from flowledger.storage.sql import Row
from flowledger.storage.tx import Conflict, Tx

OUTBOX = table(Outbox)


def holds_of(tx: Tx, operation_id: str) -> list[OpenHold]:
    """The open holds about an operation, oldest first."""
    rows = tx.all(
        "SELECT id, reason, blocking, cause_key FROM holds "
        "WHERE operation_id = :id AND resolved_at IS NULL ORDER BY id",
        {"id": operation_id},
    )
    return [OpenHold(r.id, Reason(r.reason), bool(r.blocking), r.cause_key) for r in rows]


_HOLD_COLUMNS = (
    "cause_key", "reason", "blocking", "operation_id", "execution_id", "source", "detail",
    "opened_at", "deadline",
)  # fmt: skip
_HOLD_TIMES = ("opened_at", "deadline")
# Rows whose cause already has a hold are skipped by the unique index itself, with no lookup
# of the batch's keys first.
_PG_HOLDS_INSERT = (
    f"INSERT INTO holds ({', '.join(_HOLD_COLUMNS)}, version) "
    "SELECT *, 0 FROM unnest(:cause_key::varchar[], :reason::varchar[], :blocking::boolean[], "
    ":operation_id::varchar[], :execution_id::varchar[], :source::varchar[], "
    ":detail::varchar[], :opened_at::timestamptz[], :deadline::timestamptz[]) "
    "ON CONFLICT (cause_key) DO NOTHING RETURNING cause_key, id"
)
# SQLite: each row's values by position (a name bound is a name looked up, per value), its
# conflicts skipped by the unique index as on PostgreSQL (3.24 has ON CONFLICT).
_SQLITE_HOLD_INSERT = (
    f"INSERT INTO holds ({', '.join(_HOLD_COLUMNS)}, version) "
    f"VALUES ({', '.join('?' * len(_HOLD_COLUMNS))}, 0) ON CONFLICT (cause_key) DO NOTHING"
)


def insert_new_holds(tx: Tx, rows: list[dict[str, Any]]) -> dict[str, int]:
    """Insert the hold rows whose cause key has no hold yet (``rows`` have distinct keys);
    returns the new ids by cause key. The unique index skips the others (``ON CONFLICT``).
    On PostgreSQL one statement over arrays (``unnest``), however many rows, returning the
    new ids; on SQLite an ``executemany``, then the rows above the largest id before it (an
    ``INTEGER PRIMARY KEY`` row gets one more than the largest; the write lock is ours), with
    no lookup of the batch's keys before or after. Plain SQL to the driver: binding each
    row's values through SQLAlchemy cost the sweep more than the inserts themselves."""
    # A batch's holds share their opening time and a few deadlines: ``tx.time`` binds each
    # once a transaction.
    if tx.dialect != "sqlite":
        arrays = {c: [r[c] for r in rows] for c in _HOLD_COLUMNS}
        for c in _HOLD_TIMES:
            arrays[c] = [tx.time(v) for v in arrays[c]]
        return {r.cause_key: int(r.id) for r in tx.all(_PG_HOLDS_INSERT, arrays, binary=True)}
    (top,) = tx.execute("SELECT coalesce(max(id), 0) FROM holds").fetchone()
    tx.many(
        _SQLITE_HOLD_INSERT,
        [
            (r["cause_key"], r["reason"], r["blocking"], r["operation_id"], r["execution_id"],
             r["source"], r["detail"], tx.time(r["opened_at"]), tx.time(r["deadline"]))
            for r in rows
        ],
    )  # fmt: skip
    # Pairs straight from the cursor, not a named row each.
    return dict(
        tx.execute("SELECT cause_key, id FROM holds WHERE id > :top", {"top": top}).fetchall()
    )


def add_hold_evidence(tx: Tx, hold_id: int, evidence: str) -> str | None:
    """Add ``evidence`` to an open hold's detail (:func:`causes.with_evidence`); its detail
    afterwards, or ``None`` when the hold is no longer open."""
    row = tx.one("SELECT detail FROM holds WHERE id = :id AND resolved_at IS NULL", {"id": hold_id})
    if row is None:
        return None
    detail = causes.with_evidence(row.detail, evidence)
    tx.update(
        "UPDATE holds SET detail = :detail, version = version + 1 WHERE id = :id",
        {"detail": detail, "id": hold_id},
    )
    return detail


def count_cause(tx: Tx, cause_key: str, evidence: str) -> tuple[int, bool] | None:
    """One more cause for the hold of ``cause_key``: its count grows, and while it is open
    ``evidence`` is added to its detail (:func:`causes.with_evidence`). The hold's id and
    whether it is open, or ``None`` when the cause has no hold. Its row is locked first on
    PostgreSQL, so two writers counting at once both count."""
    lock = "" if tx.dialect == "sqlite" else " FOR UPDATE"
    row = tx.one(
        f"SELECT id, detail, resolved_at FROM holds WHERE cause_key = :key{lock}",
        {"key": cause_key},
    )
    if row is None:
        return None
    if row.resolved_at is not None:  # decided: counted, its detail and version stay
        tx.update("UPDATE holds SET occurrences = occurrences + 1 WHERE id = :id", {"id": row.id})
        return int(row.id), False
    tx.update(
        "UPDATE holds SET occurrences = occurrences + 1, detail = :detail,"
        " version = version + 1 WHERE id = :id",
        {"detail": causes.with_evidence(row.detail, evidence), "id": row.id},
    )
    return int(row.id), True


def load_hold(tx: Tx, hold_id: int) -> Row | None:
    return tx.one(
        "SELECT id, cause_key, reason, blocking, operation_id, resolved_at, resolved_by,"
        " resolution, deadline, version, execution_id, source FROM holds WHERE id = :id",
        {"id": hold_id},
    )


def open_overdue_about(tx: Tx, hold_id: int) -> list[int]:
    """The open ``overdue`` holds about hold ``hold_id`` (found by their cause key)."""
    low, high = causes.overdue_key_range(hold_id)
    rows = tx.all(
        "SELECT id FROM holds WHERE cause_key >= :low AND cause_key < :high"
        " AND resolved_at IS NULL ORDER BY id",
        {"low": low, "high": high},
    )
    return [r.id for r in rows]


def close_hold(tx: Tx, hold_id: int, resolution: str | None, note: str) -> bool:
    return (
        tx.update(
            "UPDATE holds SET resolved_at = :now, resolved_by = :actor,"
            " resolution = :resolution, resolution_note = :note, version = version + 1"
            " WHERE id = :id AND resolved_at IS NULL",
            {
                "now": tx.db_now,
                "actor": tx.actor,
                "resolution": resolution,
                "note": note,
                "id": hold_id,
            },
        )
        == 1
    )


def change_hold(tx: Tx, hold_id: int, version: int, values: dict[str, Any]) -> None:
    """Compare-and-set an open hold's owner, deadline or next action."""
    sets = "".join(f", {k} = :{k}" for k in values)
    changed = tx.update(
        f"UPDATE holds SET version = version + 1{sets}"
        " WHERE id = :id AND version = :version AND resolved_at IS NULL",
        {**values, "id": hold_id, "version": version},
    )
    if changed != 1:
        raise Conflict()


def insert_alerts(tx: Tx, rows: list[dict[str, Any]]) -> None:
    """Queue alert rows in the outbox (:func:`flowledger.services.outbox.rows_for`), in the
    transaction that opened their holds."""
    tx.conn.execute(OUTBOX.insert(), rows)
