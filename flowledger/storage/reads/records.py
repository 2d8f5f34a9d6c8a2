"""The records as the API and the CLI read them: one operation with its history, counts by
state and reason, the event log in order, the sources, and whether the ledger is the demo's.
Paged from the database (nothing loads a whole table); the kept executions are
:mod:`~flowledger.storage.reads.execution_copies`'."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.domain import Reason
from flowledger.storage import acting
from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Hold, Operation, table
from flowledger.storage.reads import Connection, attempts, meta, row_dict, witnesses
from flowledger.storage.reads import execution_copies as executions
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import sources as source_rows
from flowledger.storage.reads.chain import head
from flowledger.storage.reads.event_log import batch_after, event_dict
from flowledger.storage.reads.event_log import of_operation as events_of

HOLDS = table(Hold)


@dataclass(frozen=True)
class OperationDetail:
    operation: dict[str, Any]
    attempts: list[dict[str, Any]]
    receipts: list[dict[str, Any]]
    holds: list[dict[str, Any]]
    events: list[dict[str, Any]]
    # The copies of its linked executions, each once, with ``linked_via``: ``attempt``,
    # ``retry_of`` or ``custom_data`` (``flowledger.storage.reads.execution_copies.LINKED_VIA``).
    executions: list[dict[str, Any]]
    # The retries asked in the workflow tool for its holds (``hold ID release --retry``): the
    # execution retried, who asked, and the new execution n8n made, or why not (yet).
    retries: list[dict[str, Any]] = field(default_factory=list)


def operation_detail(
    store: Store, operation_id: str, *, event_limit: int = 500
) -> OperationDetail | None:
    with store.reader.connect() as conn:
        op = operations.operation(conn, operation_id)
        if op is None:
            return None
        tried = attempts.of_operation(conn, operation_id)
        receipts = attempts.receipts_of(conn, operation_id)
        held = conn.execute(
            sa.select(HOLDS).where(HOLDS.c.operation_id == operation_id).order_by(HOLDS.c.id)
        ).all()
        logged = events_of(conn, operation_id, limit=event_limit)
        # Each linked execution once, with how it is linked: by an attempt (one that names
        # its source matches only that source's copy: two tools can both have an execution
        # "42"), or by the sync's links (a retry of such an execution, or declared).
        copies = executions.linked_to(conn, operation_id)
        retried = acting.retries_of(conn, operation_id)
    return OperationDetail(
        operation=row_dict(op),
        attempts=[row_dict(r) for r in tried],
        receipts=[row_dict(r) for r in receipts],
        holds=[row_dict(r) for r in held],
        events=[event_dict(r) for r in logged],
        executions=copies,
        retries=[_retry_shown(r) for r in retried],
    )


def _retry_shown(row: dict[str, Any]) -> dict[str, Any]:
    """A retry as ``show``, the API and the TUI give it."""
    keep = ("hold_id", "source", "execution_id", "asked_at", "asked_by", "done_at", "outcome",
            "new_execution_id", "last_error")  # fmt: skip
    return {k: row[k] for k in keep}


@dataclass(frozen=True)
class Status:
    by_state: dict[str, int]
    open_holds: dict[str, int]
    blocking_open: int
    overdue: int
    events: int
    head_hash: str
    ledger_id: str = ""
    # When the backup this ledger was restored from was taken, until that is acknowledged.
    restored_from: datetime | None = None
    # The witnesses' refusals nobody has cleared (each a blocking alarm).
    witness_refusals: tuple[witnesses.Witnessed, ...] = ()
    # Twin triggers counted on ``duplicate_trigger`` holds, open or resolved, by source
    # ("" for dispatches that named none).
    twin_triggers: dict[str, int] = field(default_factory=dict)


def status(store: Store, now: datetime) -> Status:
    with store.reader.connect() as conn:
        by_state = operations.count_by_state(conn)
        by_reason, blocking, overdue = _open_counts(conn, now)
        seq, digest = head(conn)
        ledger_id = meta.identity(conn)[0]
        restored = meta.restored_from(conn)
        refused = tuple(w for w in witnesses.states(conn).values() if w.refused_at is not None)
        twins = twin_triggers(conn)
    return Status(
        by_state, by_reason, blocking, overdue, seq, digest, ledger_id, restored, refused, twins
    )


def twin_triggers(conn: Connection) -> dict[str, int]:
    """Twin triggers counted so far, by source: the counts of every ``duplicate_trigger``
    hold (their own partial index), resolved ones too."""
    # Written out, not bound: a partial index serves only a condition it can read.
    twins = sa.text(f"reason = '{Reason.DUPLICATE_TRIGGER.value}'")
    rows = conn.execute(
        sa.select(HOLDS.c.source, sa.func.sum(HOLDS.c.occurrences))
        .where(twins)
        .group_by(HOLDS.c.source)
    ).all()
    return {source or "": int(n) for source, n in rows}


def _open_counts(conn: Connection, now: datetime) -> tuple[dict[str, int], int, int]:
    """Open holds by reason, how many block, and how many are past their deadline."""
    open_q = HOLDS.c.resolved_at.is_(None)
    by_reason: dict[str, int] = dict(
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
    return by_reason, blocking, overdue


def iter_events(
    store: Store, *, since: datetime | None = None, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Every event in order (from ``since`` when given), fetched ``batch`` at a time."""
    after = 0
    while True:
        with store.reader.connect() as conn:
            rows = batch_after(conn, after, since=since, batch=batch)
        if not rows:
            return
        for r in rows:
            yield event_dict(r)
        after = rows[-1].seq


def list_sources(store: Store) -> list[dict[str, Any]]:
    """Every source the ledger has synced (a handful), with where its sync stands."""
    with store.reader.connect() as conn:
        return [row_dict(r) for r in source_rows.by_name(conn)]


def restored_from(store: Store) -> datetime | None:
    """When the backup this ledger was restored from was taken, until that is acknowledged
    (:func:`flowledger.storage.reads.meta.restored_from`)."""
    with store.reader.connect() as conn:
        return meta.restored_from(conn)


def restore_acknowledged(store: Store) -> meta.Acknowledgement | None:
    """The last restore a person acknowledged
    (:func:`flowledger.storage.reads.meta.acknowledged`)."""
    with store.reader.connect() as conn:
        return meta.acknowledged(conn)


def is_demo(store: Store) -> bool:
    """Whether this ledger was built by ``flowledger demo`` (its data is made up)."""
    with store.reader.connect() as conn:
        return meta.is_demo(conn)


def newest_input_hash(store: Store) -> str | None:
    """The input hash of the operation the newest event names (None: no event names one),
    read backwards from the last event: a few rows, however long the log."""
    events, ops = table(Event), table(Operation)
    newest = (
        sa.select(events.c.operation_id)
        .where(events.c.operation_id.is_not(None))
        .order_by(events.c.seq.desc())
        .limit(1)
        .scalar_subquery()
    )
    with store.reader.connect() as conn:
        return conn.execute(
            sa.select(ops.c.input_hash).where(ops.c.operation_id == newest)
        ).scalar_one_or_none()
