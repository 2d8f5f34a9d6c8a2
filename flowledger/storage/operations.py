"""The operations repository: the writer's statements on operations, their attempts and
receipts, inside the caller's :class:`~flowledger.storage.tx.Tx`.

The services call these (:mod:`flowledger.services`); each is one short statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flowledger import domain
from flowledger.domain import OpenHold, Reason, State
from flowledger.domain.chain import data_time
from flowledger.domain.twins import Mark
from flowledger.storage.models import from_db_time
from flowledger.storage.sql import Row
from flowledger.storage.tx import Conflict, Tx

_OP_COLUMNS = (
    "operation_id, state, input_hash, processing_version, attempt, max_attempts, "
    "execution_id, run_index, receipt, deadline, version, reapproved_version, reapproved_until"
)
# Who dispatched the operation last (:func:`mark_of`): read by a dispatch only, since every
# column a statement returns costs the writer a little.
_MARK_COLUMNS = "last_execution_id, last_workflow_id, last_dispatched_at, twin_execution_id"


# Every writer that reads an operation it may change, or opens a hold about it, holds the
# operation's row lock from that read to its commit (PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
# holds the whole database so). A writer that reads an operation while another has opened a
# hold about it, not yet committed, waits for that commit, and its next statement (a fresh
# snapshot under READ COMMITTED) sees the hold; the opener itself never changes the row, which
# spares a new row version and index entries per operation held (bench/README.md).
_LOCK = "FOR NO KEY UPDATE"


def load_operation(tx: Tx, operation_id: str) -> Row | None:
    """The operation, locked until the commit (see :data:`_LOCK`)."""
    lock = "" if tx.dialect == "sqlite" else f" {_LOCK}"
    return tx.one(
        f"SELECT {_OP_COLUMNS} FROM operations WHERE operation_id = :id{lock}",
        {"id": operation_id},
    )


def lock_operations(tx: Tx, operation_ids: Sequence[str]) -> None:
    """PostgreSQL: lock the operations until the commit, in id order (see :data:`_LOCK`),
    without waiting for the answer: the statement is queued, and what is read next goes out
    with it and is answered after it, by a snapshot that sees whatever a writer holding one
    of them committed meanwhile. A no-op on SQLite."""
    if operation_ids and tx.dialect != "sqlite":
        tx.pipeline()
        tx.execute(
            "SELECT 1 FROM operations WHERE operation_id = ANY(:ids::text[])"
            f" ORDER BY operation_id {_LOCK}",
            {"ids": sorted(set(operation_ids))},
            binary=True,
            prepare=True,
        )


def _with_holds(columns: str) -> str:
    return (
        f"SELECT {', '.join('o.' + c.strip() for c in columns.split(','))},"
        " h.id AS hold_id, h.reason AS hold_reason, h.blocking AS hold_blocking,"
        " h.cause_key AS hold_cause_key FROM operations o LEFT JOIN holds h"
        " ON h.operation_id = o.operation_id AND h.resolved_at IS NULL"
    )


_WITH_HOLDS = _with_holds(_OP_COLUMNS)
_WITH_HOLDS_AND_MARK = _with_holds(f"{_OP_COLUMNS}, {_MARK_COLUMNS}")


def load_with_holds(
    tx: Tx, operation_id: str, mark: bool = False
) -> tuple[Row | None, list[OpenHold]]:
    """The operation and its open holds in one round trip (the hot path reads both), or as
    :func:`read_ahead` read them for this unit; ``mark``: with the columns :func:`mark_of`
    reads."""
    rows = tx.read_ahead.pop(operation_id, None)
    if rows is None:
        lock_operations(tx, [operation_id])  # the holds are read after the lock is held
        select = _WITH_HOLDS_AND_MARK if mark else _WITH_HOLDS
        rows = tx.all(f"{select} WHERE o.operation_id = :id ORDER BY h.id", {"id": operation_id})
    if not rows:
        return None, []
    holds = [
        OpenHold(r.hold_id, Reason(r.hold_reason), bool(r.hold_blocking), r.hold_cause_key)
        for r in rows
        if r.hold_id is not None
    ]
    return rows[0], holds


def read_ahead(tx: Tx, operation_ids: Sequence[str]) -> None:
    """PostgreSQL: read the operations a batch's units will load, with their open holds, in
    one statement, for :func:`load_with_holds` to hand each to the first unit that asks (a
    later unit of the batch reads its operation again, and sees what the first one wrote).
    They are locked first, in id order, until the batch commits (:func:`lock_operations`):
    another receiver's batch wanting one of them waits, and so does this one for a sweep's
    hold being opened about one. What an earlier unit of the batch does can still make a
    row read ahead stale: opening or closing a hold about the operation drops it
    (:func:`read_again`), and a change of the row itself makes the later unit's
    compare-and-set fail, a lost race run again with a savepoint per unit and a read of its
    own.

    A unit read on its own cost a statement sent and a wait for its answer each; on SQLite
    a statement is a call into the process, and nothing is read ahead."""
    if tx.dialect == "sqlite" or not operation_ids:
        return
    ids = list(dict.fromkeys(operation_ids))
    found: dict[str, list[Row]] = {op: [] for op in ids}
    # Two statements, one round trip: in one, the holds would be read by a snapshot taken
    # before the lock was waited for, and miss a hold committed meanwhile.
    lock_operations(tx, ids)
    rows = tx.all(
        f"{_WITH_HOLDS_AND_MARK} WHERE o.operation_id = ANY(:ids::text[])"
        " ORDER BY o.operation_id, h.id",
        {"ids": ids},
        binary=True,
        prepare=True,
    )
    for row in rows:
        found[row.operation_id].append(row)
    tx.read_ahead.update(found)


def read_again(tx: Tx, operation_ids: Sequence[str]) -> None:
    """Drop what :func:`read_ahead` read of these operations: a hold was opened or closed
    about them in this transaction, which changes no row of theirs, so a later unit of the
    batch handed the row read ahead would decide on holds that are no longer so (and no
    compare-and-set would tell). It reads them again, and sees what this one wrote."""
    for operation_id in operation_ids:
        tx.read_ahead.pop(operation_id, None)


def dispatching_for_execution(tx: Tx, execution_id: str) -> list[Row]:
    """Operations whose current attempt this execution made and which are still in flight,
    locked on PostgreSQL so that a confirm committing meanwhile is seen (the row is read
    again after the lock) instead of getting a hold it no longer needs."""
    lock = "" if tx.dialect == "sqlite" else " FOR UPDATE"
    return tx.all(
        f"SELECT {_OP_COLUMNS} FROM operations WHERE state = 'dispatching'"
        f" AND execution_id = :e ORDER BY operation_id{lock}",
        {"e": execution_id},
    )


def to_domain(row: Any) -> domain.Operation:
    """A stored operation (a driver row or a SQLAlchemy row) as the rules see it."""
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
        reapproval=_reapproval_of(row),
    )


def mark_of(row: Any) -> Mark | None:
    """The last execution that dispatched the operation (:mod:`flowledger.domain.twins`)."""
    at = from_db_time(row.last_dispatched_at)
    if row.last_execution_id is None or at is None:
        return None
    return Mark(row.last_execution_id, row.last_workflow_id, at, row.twin_execution_id)


def _mark_values(tx: Tx, mark: Mark | None) -> dict[str, Any]:
    return {
        "last_execution_id": mark.execution_id if mark else None,
        "last_workflow_id": mark.workflow_id if mark else None,
        "last_dispatched_at": tx.time(mark.at) if mark else None,
        "twin_execution_id": mark.twin_of if mark else None,
    }


_MARK_SETS = (
    "last_execution_id = :last_execution_id, last_workflow_id = :last_workflow_id,"
    " last_dispatched_at = :last_dispatched_at, twin_execution_id = :twin_execution_id"
)


def mark_dispatch(tx: Tx, operation_id: str, mark: Mark | None) -> None:
    """Record the last execution that dispatched the operation, for a dispatch that changed
    nothing else (answered skip or hold): neither its ``version`` nor ``updated_at`` moves,
    since the operation itself did not; the row lock the dispatch's read took orders it.
    ``None`` forgets it (a person released the operation: the next dispatch is a new round)."""
    tx.execute(
        f"UPDATE operations SET {_MARK_SETS} WHERE operation_id = :operation_id",
        {"operation_id": operation_id, **_mark_values(tx, mark)},
    )


_SETTABLE = ("workflow_id", "step", "source", "input_ref", "approval_version")


def save_operation(
    tx: Tx,
    row: Row | None,
    op: domain.Operation,
    extra: dict[str, Any] | None = None,
    mark: Mark | None = None,
) -> None:
    """Insert a new operation, or compare-and-set an existing one on its ``version``
    (and state): zero rows changed means another writer got there first (:class:`Conflict`,
    raised at once or, in the receiver's pipeline, when the unit settles). ``mark``: the
    dispatch's new :class:`Mark`, written in the same statement (``None`` leaves it)."""
    extra = {k: v for k, v in (extra or {}).items() if v is not None}
    values: dict[str, Any] = {
        "operation_id": op.operation_id,
        "state": op.state.value,
        "attempt": op.attempt,
        "execution_id": op.execution_id,
        "run_index": op.run_index,
        "receipt": op.receipt,
        "deadline": tx.time(op.deadline),
        "now": tx.db_now,
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
            " approval_expires_at, last_execution_id, last_workflow_id, last_dispatched_at,"
            " twin_execution_id) VALUES (:operation_id, :state, :input_hash,"
            " :processing_version, :attempt, :max_attempts, :execution_id, :run_index,"
            " :receipt, :deadline, 1, :now, :now, :workflow_id, :step, :source, :input_ref,"
            " :approval_version, :approval_expires_at, :last_execution_id, :last_workflow_id,"
            " :last_dispatched_at, :twin_execution_id)",
            values | _mark_values(tx, mark),
        )
        return
    sets = [f"{k} = :{k}" for k in _SETTABLE if k in extra]
    values.update({k: extra[k] for k in _SETTABLE if k in extra})
    if approval_expires is not None:
        sets.append("approval_expires_at = :approval_expires_at")
        values["approval_expires_at"] = tx.time(approval_expires)
    if op.reapproval != _reapproval_of(row) or op.max_attempts != row.max_attempts:
        # A person's decision on the next dispatch (rare: the hot path leaves these be).
        sets.append("max_attempts = :max_attempts")
        sets.append("reapproved_version = :reapproved_version")
        sets.append("reapproved_until = :reapproved_until")
        approval = op.reapproval
        values.update(
            max_attempts=op.max_attempts,
            reapproved_version=approval.version if approval else None,
            reapproved_until=tx.time(approval.expires_at) if approval else None,
        )
    if mark is not None:
        sets.append(_MARK_SETS)
        values.update(_mark_values(tx, mark))
    values.update(old_version=row.version, old_state=row.state)
    tx.expect_one(
        "UPDATE operations SET state = :state, attempt = :attempt,"
        " execution_id = :execution_id, run_index = :run_index, receipt = :receipt,"
        " deadline = :deadline, updated_at = :now, version = version + 1"
        + "".join(f", {s}" for s in sets)
        + " WHERE operation_id = :operation_id AND version = :old_version"
        " AND state = :old_state",
        values,
        Conflict,
    )


def _reapproval_of(row: Any) -> domain.Approval | None:
    version = row.reapproved_version
    return domain.Approval(version, from_db_time(row.reapproved_until)) if version else None


def written_with(op: domain.Operation, input_ref: str | None, created: bool) -> dict[str, Any]:
    """What :func:`save_operation` wrote from the request and the configuration, for the
    event of the call that wrote it, so that ``verify --deep`` can compare those columns too:
    the ``deadline`` (of the operation and of its new attempt), the ``input_ref`` (``None`` on
    an existing operation: it keeps the one it has) and, when the row is created, its
    ``max_attempts``."""
    data: dict[str, Any] = {"deadline": data_time(op.deadline), "input_ref": input_ref}
    if created:
        data["max_attempts"] = op.max_attempts
    return data


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
            "now": tx.db_now,
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
            "now": tx.db_now,
            "error": error or None,
            "id": operation_id,
            "number": number,
        },
    )


def unsent_attempts(tx: Tx, operation_id: str) -> int:
    """How many of the operation's attempts ended ``unsent`` (:data:`domain.UNSENT`)."""
    row = tx.one(
        "SELECT COUNT(*) AS n FROM attempts WHERE operation_id = :id AND outcome = :outcome",
        {"id": operation_id, "outcome": domain.UNSENT},
    )
    return int(row.n) if row is not None else 0


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
            "now": tx.db_now,
            "actor": tx.actor,
            "kind": kind,
            "detail": detail,
        },
    )
