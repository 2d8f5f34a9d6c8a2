"""Reads of the holds: the attention queue (open holds with their operation's state and
workflow, whether it has an open receipt conflict and the status of the execution they
concern), a window of it for a search, counts, one hold, resolutions and the open holds of
an operation.

Every list is bounded by a ``limit`` and ordered by an indexed column (or over open holds
only, which the ``(resolved_at, deadline)`` index already narrows).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa

from flowledger.storage.models import Execution, Hold, Operation, table
from flowledger.storage.views import Connection, contains, row_dict

HOLDS = table(Hold)
OPS = table(Operation)
EXECUTIONS = table(Execution)

QUEUE_SORTS = {
    "deadline": HOLDS.c.deadline,
    "opened": HOLDS.c.opened_at,
    "reason": HOLDS.c.reason,
    "owner": HOLDS.c.owner,
    "operation": HOLDS.c.operation_id,
    "state": OPS.c.state,
    "workflow": OPS.c.workflow_id,
}
# The sorts on columns that are never NULL page by key: the next page starts after the last
# row's (value, id), read through the open-holds index, whatever the page's depth. The others
# (a NULL sorts apart on each database) page by offset.
KEYSET_SORTS = {"deadline": "deadline", "opened": "opened_at", "reason": "reason"}
FILTER_FIELDS = {
    "reason": HOLDS.c.reason,
    "owner": HOLDS.c.owner,
    "op": HOLDS.c.operation_id,
    "state": OPS.c.state,
    "workflow": OPS.c.workflow_id,
    "source": HOLDS.c.source,
}
_WORD_COLUMNS = (
    HOLDS.c.operation_id,
    HOLDS.c.reason,
    HOLDS.c.owner,
    HOLDS.c.detail,
    HOLDS.c.next_action,
    HOLDS.c.source,
    OPS.c.workflow_id,
)


class QueueFilter(Protocol):
    """What the queue shows (:class:`flowledger.queries.holds.HoldFilter`): free words,
    ``field:value`` pairs (names of :data:`FILTER_FIELDS`), ``overdue`` and ``blocking``."""

    @property
    def words(self) -> tuple[str, ...]: ...
    @property
    def fields(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def overdue(self) -> bool: ...
    @property
    def blocking(self) -> bool: ...
    @property
    def reason(self) -> str | None: ...


def _exec_status(ref: Any, source: Any) -> Any:
    """The newest kept copy's status of the execution ``ref`` names (``gone`` marked), from
    ``source`` when one is known: two tools can both have an execution "42"."""
    status = sa.case(
        (EXECUTIONS.c.gone_at.is_not(None), EXECUTIONS.c.status + " (gone)"),
        else_=EXECUTIONS.c.status,
    )
    return (
        sa.select(status)
        .where(
            EXECUTIONS.c.external_id == ref,
            sa.or_(source.is_(None), EXECUTIONS.c.source == source),
        )
        .order_by(EXECUTIONS.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


def _conflict() -> Any:
    """Whether the hold's operation has an open ``receipt_conflict`` hold: with its state, what
    :func:`flowledger.domain.allowed` needs to say which decisions the hold offers."""
    other = HOLDS.alias("conflict")
    return (
        sa.exists()
        .where(
            other.c.operation_id == HOLDS.c.operation_id,
            other.c.reason == "receipt_conflict",
            other.c.resolved_at.is_(None),
        )
        .label("operation_conflict")
    )


def _queue_where(flt: QueueFilter, now: datetime) -> list[Any]:
    where: list[Any] = [HOLDS.c.resolved_at.is_(None)]
    for word in flt.words:
        where.append(sa.or_(*(contains(col, word) for col in _WORD_COLUMNS)))
    for name, value in flt.fields:
        where.append(contains(FILTER_FIELDS[name], value))
    if flt.overdue:
        where.append(HOLDS.c.deadline <= now)
    if flt.blocking:
        where.append(HOLDS.c.blocking.is_(True))
    if flt.reason is not None:
        where.append(HOLDS.c.reason == flt.reason)
    return where


def _after_key(column: Any, value: Any, row_id: int, descending: bool) -> Any:
    """Rows after ``(value, row_id)`` in ``(column, id)`` order (``column`` never NULL),
    written with a range on ``column`` that an index on it can start from."""
    if descending:
        return sa.and_(column <= value, sa.or_(column < value, HOLDS.c.id > row_id))
    return sa.and_(column >= value, sa.or_(column > value, HOLDS.c.id > row_id))


def _through_key(column: Any, value: Any, row_id: int, descending: bool) -> Any:
    """Rows up to and including ``(value, row_id)`` in that order: where a window ends."""
    if descending:
        return sa.and_(column >= value, sa.or_(column > value, HOLDS.c.id <= row_id))
    return sa.and_(column <= value, sa.or_(column < value, HOLDS.c.id <= row_id))


def _queue_stmt(
    flt: QueueFilter,
    now: datetime,
    sort: str,
    descending: bool,
    after: dict[str, Any] | None,
    through: dict[str, Any] | None = None,
) -> tuple[Any, bool]:
    """The queue's statement without its limit, and whether it pages by key. ``through``: the
    last hold (by the sort's key) a windowed search may reach."""
    column = QUEUE_SORTS[sort]
    where = _queue_where(flt, now)
    keyset = after is not None and sort in KEYSET_SORTS
    if keyset:
        assert after is not None
        where.append(_after_key(column, after[KEYSET_SORTS[sort]], after["id"], descending))
    if through is not None:
        where.append(_through_key(column, through[KEYSET_SORTS[sort]], through["id"], descending))
    stmt = (
        sa.select(
            HOLDS,
            OPS.c.state.label("operation_state"),
            OPS.c.workflow_id.label("workflow_id"),
            _conflict(),
            _exec_status(
                sa.func.coalesce(HOLDS.c.execution_id, OPS.c.execution_id),
                sa.func.coalesce(HOLDS.c.source, OPS.c.source),
            ).label("execution_status"),
        )
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(*where)
        .order_by(column.desc() if descending else column.asc(), HOLDS.c.id)
    )
    return stmt, keyset


def queue(
    conn: Connection,
    flt: QueueFilter,
    now: datetime,
    *,
    sort: str,
    descending: bool,
    limit: int,
    offset: int = 0,
    after: dict[str, Any] | None = None,
    through: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One page of the queue: by key after ``after`` where the sort allows, else from
    ``offset``; down to ``through`` (a window's end) when given."""
    stmt, keyset = _queue_stmt(flt, now, sort, descending, after, through)
    stmt = stmt.limit(limit)
    if through is None:
        stmt = stmt.offset(0 if keyset else offset)
    return [row_dict(r) for r in conn.execute(stmt)]


def window_end(
    conn: Connection, window: int, *, descending: bool, after: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The ``window``-th open hold in deadline order after ``after`` (``deadline`` and
    ``id``), read from the open holds' index alone; None when there are fewer."""
    column = HOLDS.c.deadline
    edge = (
        sa.select(column.label("deadline"), HOLDS.c.id)
        .where(HOLDS.c.resolved_at.is_(None))
        .order_by(column.desc() if descending else column.asc(), HOLDS.c.id)
        .offset(window - 1)
        .limit(1)
    )
    if after is not None:
        edge = edge.where(_after_key(column, after["deadline"], after["id"], descending))
    end = conn.execute(edge).first()
    return row_dict(end) if end is not None else None


def more_open_than(conn: Connection, window: int) -> bool:
    beyond = sa.select(HOLDS.c.id).where(HOLDS.c.resolved_at.is_(None)).offset(window).limit(1)
    return conn.execute(beyond).first() is not None


def count_queue(conn: Connection, flt: QueueFilter, now: datetime) -> int:
    """How many open holds ``flt`` lets through (the operations joined only when the filter
    reads their columns)."""
    stmt = (
        sa.select(sa.func.count())
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(*_queue_where(flt, now))
    )
    if not flt.words and not any(name in ("state", "workflow") for name, _ in flt.fields):
        stmt = sa.select(sa.func.count()).select_from(HOLDS).where(*_queue_where(flt, now))
    return int(conn.execute(stmt).scalar_one())


def hold(conn: Connection, hold_id: int) -> dict[str, Any] | None:
    """One hold, with what its operation's state and receipt conflicts allow (as the queue)."""
    stmt = (
        sa.select(HOLDS, OPS.c.state.label("operation_state"), _conflict())
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(HOLDS.c.id == hold_id)
    )
    row = conn.execute(stmt).first()
    return row_dict(row) if row is not None else None


def resolved(
    conn: Connection, since: datetime, until: datetime, *, after_id: int, limit: int
) -> list[dict[str, Any]]:
    """Holds resolved in ``[since, until)`` after ``after_id``, by id (the ``(resolved_at,
    deadline)`` index bounds the scan)."""
    stmt = (
        sa.select(HOLDS)
        .where(
            HOLDS.c.resolved_at >= since,
            HOLDS.c.resolved_at < until,
            HOLDS.c.id > after_id,
        )
        .order_by(HOLDS.c.id)
        .limit(limit)
    )
    return [row_dict(r) for r in conn.execute(stmt)]


def open_by_deadline(
    conn: Connection, *, limit: int, offset: int, reason: str | None
) -> list[dict[str, Any]]:
    """Open holds, soonest deadline first, with their operation's state and workflow."""
    stmt = (
        sa.select(
            HOLDS, OPS.c.state.label("operation_state"), OPS.c.workflow_id.label("workflow_id")
        )
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(HOLDS.c.resolved_at.is_(None))
        .order_by(HOLDS.c.deadline, HOLDS.c.id)
        .limit(limit)
        .offset(offset)
    )
    if reason is not None:
        stmt = stmt.where(HOLDS.c.reason == reason)
    return [row_dict(r) for r in conn.execute(stmt)]


def of_operation(conn: Connection, operation_id: str) -> list[Any]:
    return list(
        conn.execute(
            sa.select(HOLDS).where(HOLDS.c.operation_id == operation_id).order_by(HOLDS.c.id)
        ).all()
    )


def open_counts(conn: Connection, now: datetime) -> tuple[dict[str, int], int, int]:
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


def count_open(conn: Connection) -> int:
    return int(
        conn.execute(sa.select(sa.func.count()).where(HOLDS.c.resolved_at.is_(None))).scalar_one()
    )
