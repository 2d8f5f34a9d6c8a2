"""The statements of the sync's version check (:mod:`flowledger.sync.versions`), inside the
caller's transaction; tables in :mod:`flowledger.storage.version_tables`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from flowledger.domain.versions import Active
from flowledger.storage.models import from_db_time
from flowledger.storage.sql import Row, in_list
from flowledger.storage.tx import Tx

# Imported for its tables' registration on the metadata.
from flowledger.storage.version_tables import ExecutionVersion  # noqa: F401


def mark_due(tx: Tx, source: str, executions: Sequence[tuple[str, str | None]]) -> None:
    """Executions (id, workflow) that dispatched an operation just linked: each has a row, due
    to be judged (its version is read once, on its first)."""
    for external_id, workflow_id in executions:
        tx.execute(
            "INSERT INTO execution_versions (source, external_id, workflow_id, due,"
            " judged_attempt) VALUES (:source, :id, :workflow, :due, 0)"
            " ON CONFLICT (source, external_id) DO UPDATE SET due = :due",
            {"source": source, "id": external_id, "workflow": workflow_id, "due": True},
        )


# A due execution with when its copy says it started (none when the ledger has no copy).
_DUE = (
    "SELECT v.id, v.external_id, v.workflow_id, v.version_id, v.read_at, v.judged_attempt,"
    " e.started_at FROM execution_versions v LEFT JOIN executions e"
    " ON e.source = v.source AND e.external_id = v.external_id"
    " WHERE v.source = :source AND v.due = :due"
)


def due(tx: Tx, source: str, limit: int) -> list[Row]:
    """The source's due executions, oldest row first: up to ``limit`` not read yet (each
    costs a request) and up to ``limit`` read already (a further dispatch of theirs to
    judge)."""
    unread = tx.all(
        f"{_DUE} AND v.read_at IS NULL ORDER BY v.id LIMIT :limit",
        {"source": source, "due": True, "limit": limit},
    )
    read = tx.all(
        f"{_DUE} AND v.read_at IS NOT NULL ORDER BY v.id LIMIT :limit",
        {"source": source, "due": True, "limit": limit},
    )
    return _timed(unread + read, "started_at")


def count_unread(tx: Tx, source: str) -> int:
    row = tx.one(
        "SELECT COUNT(*) AS n FROM execution_versions WHERE source = :source AND due = :due"
        " AND read_at IS NULL",
        {"source": source, "due": True},
    )
    return int(row.n) if row is not None else 0


def save_read(tx: Tx, row_id: int, version_id: str | None) -> None:
    tx.update(
        "UPDATE execution_versions SET version_id = :version, read_at = :now WHERE id = :id",
        {"version": version_id, "now": tx.db_now, "id": row_id},
    )


def judged(tx: Tx, row_id: int, attempt: int) -> None:
    tx.update(
        "UPDATE execution_versions SET due = :due, judged_attempt = :attempt WHERE id = :id",
        {"due": False, "attempt": attempt, "id": row_id},
    )


def dispatches(tx: Tx, external_id: str, after: int) -> list[Row]:
    """``(id, operation_id, source, workflow_id, dispatched_at)`` of the execution's attempts
    past row ``after``."""
    rows = tx.all(
        "SELECT id, operation_id, source, workflow_id, dispatched_at FROM attempts"
        " WHERE execution_id = :id AND id > :after ORDER BY id",
        {"id": external_id, "after": after},
    )
    return _timed(rows, "dispatched_at")


def seen_active(
    tx: Tx, source: str, workflow_id: str, version_id: str, activated_at: datetime
) -> None:
    """The version was read active now, since ``activated_at``."""
    params = {
        "source": source,
        "workflow": workflow_id,
        "version": version_id,
        "at": tx.time(activated_at),
        "now": tx.db_now,
    }
    tx.execute(
        "INSERT INTO workflow_versions (source, workflow_id, version_id, activated_at, seen_at)"
        " VALUES (:source, :workflow, :version, :at, :now)"
        " ON CONFLICT (source, workflow_id, version_id, activated_at)"
        " DO UPDATE SET seen_at = :now",
        params,
    )


def spans(tx: Tx, source: str, workflow_ids: Sequence[str]) -> dict[str, list[Active]]:
    """The spans the ledger saw each workflow's versions active in."""
    if not workflow_ids:
        return {}
    where, params = in_list("w", list(workflow_ids))
    rows = tx.all(
        "SELECT workflow_id, version_id, activated_at, seen_at FROM workflow_versions"
        f" WHERE source = :source AND workflow_id {where}",
        {**params, "source": source},
    )
    out: dict[str, list[Active]] = {}
    for r in rows:
        since, seen = from_db_time(r.activated_at), from_db_time(r.seen_at)
        assert since is not None and seen is not None
        out.setdefault(r.workflow_id, []).append(Active(r.version_id, since, seen))
    return out


def _timed(rows: list[Row], name: str) -> list[Row]:
    """``rows`` with column ``name`` an aware UTC time, however the driver handed it."""
    for r in rows:
        r[name] = from_db_time(r[name])
    return rows
