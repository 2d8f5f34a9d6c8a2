"""The writer's statements on operations, attempts, receipts and holds, inside a :class:`Tx`.

Only ``ledger.services`` calls these; each is one short statement.
"""

from __future__ import annotations

from typing import Any

from ledger import domain
from ledger.domain import OpenHold, Reason, State
from ledger.tx import Row, Tx, from_db_time


class Conflict(Exception):
    """Another writer changed the row between our read and our write: run again."""


_OP_COLUMNS = (
    "operation_id, state, input_hash, processing_version, attempt, max_attempts, "
    "execution_id, run_index, receipt, deadline, version"
)


def load_operation(tx: Tx, operation_id: str) -> Row | None:
    return tx.one(
        f"SELECT {_OP_COLUMNS} FROM operations WHERE operation_id = :id", {"id": operation_id}
    )


def to_domain(row: Row) -> domain.Operation:
    return domain.Operation(
        operation_id=row.operation_id,
        state=State(row.state),
        input_hash=row.input_hash,
        processing_version=row.processing_version,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        execution_id=row.execution_id,
        run_index=row.run_index,
        receipt=row.receipt,
        deadline=from_db_time(row.deadline),
        version=row.version,
    )


def open_holds(tx: Tx, operation_id: str) -> list[OpenHold]:
    rows = tx.all(
        "SELECT id, reason, blocking, cause_key FROM holds "
        "WHERE operation_id = :id AND resolved_at IS NULL ORDER BY id",
        {"id": operation_id},
    )
    return [OpenHold(r.id, Reason(r.reason), bool(r.blocking), r.cause_key) for r in rows]


_SETTABLE = ("workflow_id", "step", "source", "input_ref", "approval_version")


def save_operation(
    tx: Tx, row: Row | None, op: domain.Operation, extra: dict[str, Any] | None = None
) -> None:
    """Insert a new operation, or compare-and-set an existing one on its ``version``
    (and state): zero rows changed means another writer got there first."""
    extra = {k: v for k, v in (extra or {}).items() if v is not None}
    values: dict[str, Any] = {
        "operation_id": op.operation_id,
        "state": op.state.value,
        "attempt": op.attempt,
        "execution_id": op.execution_id,
        "run_index": op.run_index,
        "receipt": op.receipt,
        "deadline": tx.time(op.deadline),
        "now": tx.time(tx.now),
    }
    approval_expires = extra.pop("approval_expires_at", None)
    if row is None:
        values.update(
            input_hash=op.input_hash,
            processing_version=op.processing_version,
            max_attempts=op.max_attempts,
            approval_expires_at=tx.time(approval_expires),
            **{k: extra.get(k) for k in _SETTABLE},
        )
        tx.execute(
            "INSERT INTO operations (operation_id, state, input_hash, processing_version,"
            " attempt, max_attempts, execution_id, run_index, receipt, deadline, version,"
            " created_at, updated_at, workflow_id, step, source, input_ref, approval_version,"
            " approval_expires_at) VALUES (:operation_id, :state, :input_hash,"
            " :processing_version, :attempt, :max_attempts, :execution_id, :run_index,"
            " :receipt, :deadline, 1, :now, :now, :workflow_id, :step, :source, :input_ref,"
            " :approval_version, :approval_expires_at)",
            values,
        )
        return
    sets = [f"{k} = :{k}" for k in _SETTABLE if k in extra]
    values.update({k: extra[k] for k in _SETTABLE if k in extra})
    if approval_expires is not None:
        sets.append("approval_expires_at = :approval_expires_at")
        values["approval_expires_at"] = tx.time(approval_expires)
    values.update(old_version=row.version, old_state=row.state)
    changed = tx.update(
        "UPDATE operations SET state = :state, attempt = :attempt,"
        " execution_id = :execution_id, run_index = :run_index, receipt = :receipt,"
        " deadline = :deadline, updated_at = :now, version = version + 1"
        + "".join(f", {s}" for s in sets)
        + " WHERE operation_id = :operation_id AND version = :old_version"
        " AND state = :old_state",
        values,
    )
    if changed != 1:
        raise Conflict()


def insert_attempt(tx: Tx, op: domain.Operation, extra: dict[str, Any]) -> None:
    tx.execute(
        "INSERT INTO attempts (operation_id, number, execution_id, run_index, workflow_id,"
        " step, source, dispatched_at, deadline, outcome) VALUES (:operation_id, :number,"
        " :execution_id, :run_index, :workflow_id, :step, :source, :now, :deadline,"
        " 'dispatching')",
        {
            "operation_id": op.operation_id,
            "number": op.attempt,
            "execution_id": op.execution_id,
            "run_index": op.run_index,
            "workflow_id": extra.get("workflow_id"),
            "step": extra.get("step"),
            "source": extra.get("source"),
            "now": tx.time(tx.now),
            "deadline": tx.time(op.deadline),
        },
    )


def end_attempt(
    tx: Tx, operation_id: str, number: int, outcome: str, error: str | None = None
) -> None:
    tx.execute(
        "UPDATE attempts SET outcome = :outcome, ended_at = :now, error = :error"
        " WHERE operation_id = :id AND number = :number",
        {
            "outcome": outcome,
            "now": tx.time(tx.now),
            "error": error or None,
            "id": operation_id,
            "number": number,
        },
    )


def insert_receipt(
    tx: Tx,
    operation_id: str,
    attempt: int,
    receipt: str,
    *,
    kind: str,
    execution_id: str | None = None,
    detail: str | None = None,
) -> None:
    tx.execute(
        "INSERT INTO receipts (operation_id, attempt, receipt, execution_id, confirmed_at,"
        " confirmed_by, kind, detail) VALUES (:id, :attempt, :receipt, :execution_id, :now,"
        " :actor, :kind, :detail)",
        {
            "id": operation_id,
            "attempt": attempt,
            "receipt": receipt,
            "execution_id": execution_id,
            "now": tx.time(tx.now),
            "actor": tx.actor,
            "kind": kind,
            "detail": detail,
        },
    )


def hold_exists(tx: Tx, cause_key: str) -> bool:
    return tx.one("SELECT id FROM holds WHERE cause_key = :k", {"k": cause_key}) is not None


def insert_hold(
    tx: Tx,
    hold: domain.NewHold,
    *,
    operation_id: str | None,
    execution_id: str | None,
    source: str | None,
) -> int:
    row = tx.one(
        "INSERT INTO holds (cause_key, reason, blocking, operation_id, execution_id, source,"
        " detail, opened_at, deadline, version) VALUES (:cause_key, :reason, :blocking,"
        " :operation_id, :execution_id, :source, :detail, :now, :deadline, 0) RETURNING id",
        {
            "cause_key": hold.cause_key,
            "reason": hold.reason.value,
            "blocking": hold.blocking,
            "operation_id": operation_id,
            "execution_id": execution_id,
            "source": source,
            "detail": hold.detail[:2000],
            "now": tx.time(tx.now),
            "deadline": tx.time(domain.hold_deadline(tx.now, hold.reason)),
        },
    )
    assert row is not None
    return int(row.id)


def load_hold(tx: Tx, hold_id: int) -> Row | None:
    return tx.one(
        "SELECT id, cause_key, reason, blocking, operation_id, resolved_at, resolved_by,"
        " resolution, version FROM holds WHERE id = :id",
        {"id": hold_id},
    )


def close_hold(tx: Tx, hold_id: int, resolution: str | None, note: str) -> bool:
    return (
        tx.update(
            "UPDATE holds SET resolved_at = :now, resolved_by = :actor,"
            " resolution = :resolution, resolution_note = :note, version = version + 1"
            " WHERE id = :id AND resolved_at IS NULL",
            {
                "now": tx.time(tx.now),
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
