"""The records as the API and the CLI read them: one operation with its history, counts by
state and reason, the event log, the kept executions and the sources. Paged from the database
(nothing loads a whole table)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowledger.storage.engine import Store
from flowledger.storage.problems import Missing
from flowledger.storage.views import attempts, events, executions, holds, meta, operations
from flowledger.storage.views import row_dict as row_dict
from flowledger.storage.views import sources as source_rows
from flowledger.storage.views.chain import head


@dataclass(frozen=True)
class OperationDetail:
    operation: dict[str, Any]
    attempts: list[dict[str, Any]]
    receipts: list[dict[str, Any]]
    holds: list[dict[str, Any]]
    events: list[dict[str, Any]]
    # The copies of its linked executions, each once, with ``linked_via``: ``attempt``,
    # ``retry_of`` or ``custom_data`` (``flowledger.storage.views.executions.LINKED_VIA``).
    executions: list[dict[str, Any]]


def operation_detail(
    store: Store, operation_id: str, *, event_limit: int = 500
) -> OperationDetail | None:
    with store.reader.connect() as conn:
        op = operations.operation(conn, operation_id)
        if op is None:
            return None
        tried = attempts.of_operation(conn, operation_id)
        receipts = attempts.receipts_of(conn, operation_id)
        held = holds.of_operation(conn, operation_id)
        logged = events.of_operation(conn, operation_id, limit=event_limit)
        # Each linked execution once, with how it is linked: by an attempt (one that names
        # its source matches only that source's copy: two tools can both have an execution
        # "42"), or by the sync's links (a retry of such an execution, or declared).
        copies = executions.linked_to(conn, operation_id)
    return OperationDetail(
        operation=row_dict(op),
        attempts=[row_dict(r) for r in tried],
        receipts=[row_dict(r) for r in receipts],
        holds=[row_dict(r) for r in held],
        events=[event_dict(r) for r in logged],
        executions=copies,
    )


def event_dict(row: Any) -> dict[str, Any]:
    d = row_dict(row)
    d["data"] = json.loads(d["data"])
    return d


def list_open_holds(
    store: Store, *, limit: int = 100, offset: int = 0, reason: str | None = None
) -> list[dict[str, Any]]:
    """Open holds, soonest deadline first, with their operation's state and workflow."""
    with store.reader.connect() as conn:
        return holds.open_by_deadline(conn, limit=limit, offset=offset, reason=reason)


@dataclass(frozen=True)
class Status:
    by_state: dict[str, int]
    open_holds: dict[str, int]
    blocking_open: int
    overdue: int
    events: int
    head_hash: str
    ledger_id: str = ""


def status(store: Store, now: datetime) -> Status:
    with store.reader.connect() as conn:
        by_state = operations.count_by_state(conn)
        by_reason, blocking, overdue = holds.open_counts(conn, now)
        seq, digest = head(conn)
        ledger_id = meta.identity(conn)[0]
    return Status(by_state, by_reason, blocking, overdue, seq, digest, ledger_id)


def iter_events(
    store: Store, *, since: datetime | None = None, batch: int = 1000
) -> Iterator[dict[str, Any]]:
    """Every event in order (from ``since`` when given), fetched ``batch`` at a time."""
    after = 0
    while True:
        with store.reader.connect() as conn:
            rows = events.batch_after(conn, after, since=since, batch=batch)
        if not rows:
            return
        for r in rows:
            yield event_dict(r)
        after = rows[-1].seq


def list_executions(
    store: Store,
    *,
    source: str | None = None,
    status: str | None = None,
    gone: bool | None = None,
    after: int | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """The kept execution copies, most recently started first (queued ones by when the
    ledger first saw them), ``limit`` at a time. Keyset paging: pass the last row's ``id`` as
    ``after`` for the next page. ``gone``: ``True`` only copies the tool no longer has,
    ``False`` only those it still has. An ``after`` that is no row is :class:`Missing`."""
    with store.reader.connect() as conn:
        found = executions.newest(
            conn,
            source=source,
            status=status,
            gone=gone,
            after=after,
            limit=max(1, min(limit, 1000)),
        )
        if not found and after is not None and not executions.exists(conn, after):
            raise Missing(f"no execution row {after} to continue after")
    return found


def list_sources(store: Store) -> list[dict[str, Any]]:
    """Every source the ledger has synced (a handful), with where its sync stands."""
    with store.reader.connect() as conn:
        return [row_dict(r) for r in source_rows.by_name(conn)]


def is_demo(store: Store) -> bool:
    """Whether this ledger was built by ``flowledger demo`` (its data is made up)."""
    with store.reader.connect() as conn:
        return meta.is_demo(conn)
