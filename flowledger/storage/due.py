"""The sweep's due reads: the rows that waited too long and have no hold for their cause yet.

Each read goes through an index (operations by (state, deadline, operation_id) and (state,
updated_at, operation_id); holds by (resolved_at, deadline); running executions by (final,
status, started_at, id)) a bounded page at a time (:mod:`flowledger.storage.paging`). Rows that
already have their hold are left out by the query itself (``NOT EXISTS`` on the unique cause
key, built in SQL by :func:`sql_cause_key`), so a sweep opens nothing twice. The reads that
lock their rows skip those another transaction holds (``paging.skip_locked``): an operation a
writer is deciding on waits for a later sweep.

Every statement's fixed part (its cause key, "no hold yet", joins and conditions) is built once,
at import: built again for every page it was a measurable part of a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.domain import Reason, State, causes, staleness
from flowledger.storage.models import Execution, Hold, Operation, Source, table
from flowledger.storage.paging import Listed, Walk, skip_locked

OPS = table(Operation)
HOLDS = table(Hold)
EXECUTIONS = table(Execution)
SOURCES = table(Source)

# What the operation rules read of a due row: its hold's detail and target, and the walk's
# columns (the cause key comes with it). Not the whole row: that cost more per hold than the
# hold itself (bench/README.md, "Sweep").
DUE_COLUMNS = ("operation_id", "execution_id", "source", "deadline", "updated_at")


def sql_cause_key(reason: Reason, **parts: sa.ColumnElement[Any]) -> sa.ColumnElement[str]:
    """:func:`flowledger.domain.causes.cause_key` as SQL over columns: the same prefix, parts and
    order, from the same table (a property test compares the two on both databases)."""
    prefix, names = causes.PARTS[reason]
    if set(parts) != set(names):
        raise TypeError(f"{reason.value} cause key takes {names}, got {tuple(parts)}")
    key: sa.ColumnElement[str] = sa.literal(prefix, sa.String)
    for name in names:
        part = parts[name]
        text = part if isinstance(part.type, sa.String) else sa.cast(part, sa.String)
        key = key + ":" + text
    return key


def _unheld(key: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    return ~sa.exists().where(HOLDS.c.cause_key == key)


class OperationsDue:
    """Operations in ``state`` whose ``since`` column (``deadline``, ``updated_at``) is at or
    before a given time, the ``null`` columns empty, and no hold of ``reason`` for them yet,
    walked in (since, operation_id) order and locked. The cause key is built from the
    operation's columns named as :data:`flowledger.domain.causes.PARTS` names its parts, and
    read with each row (``cause_key``) for the hold to open: the text Python would build."""

    def __init__(
        self,
        reason: Reason,
        state: State,
        since: str,
        *,
        null: Sequence[str] = (),
        columns: Sequence[str] = DUE_COLUMNS,
    ) -> None:
        key = sql_cause_key(reason, **{name: OPS.c[name] for name in causes.PARTS[reason][1]})
        self._since = OPS.c[since]
        self._select = sa.select(*(OPS.c[c] for c in columns), key.label("cause_key"))
        self._state = OPS.c.state == state.value
        self._rest = (*(OPS.c[c].is_(None) for c in null), _unheld(key))

    def walk(self) -> Walk:
        return Walk(self._since, OPS.c.operation_id)

    def read(self, conn: sa.Connection, walk: Walk, until: datetime, limit: int) -> Sequence[Any]:
        """The next page of ``walk`` due at ``until``, locked; the walk is told what it saw."""
        stmt = self._select.where(self._state, self._since <= until, *self._rest)
        rows = conn.execute(skip_locked(conn, walk.page(stmt, limit), OPS)).all()
        walk.saw(rows)
        return rows


# ---------------------------------------------------------------- execution_failed


_FAILED_KEY = sql_cause_key(
    Reason.EXECUTION_FAILED,
    operation_id=OPS.c.operation_id,
    attempt=OPS.c.attempt,
    execution_id=EXECUTIONS.c.external_id,
)


def _failed_due() -> tuple[sa.ColumnElement[bool], ...]:
    """The execution_failed conditions over :data:`_FAILED_JOIN`."""
    failed = sa.or_(
        EXECUTIONS.c.status.in_(staleness.FAILED_EXECUTION_STATUSES),
        sa.and_(EXECUTIONS.c.gone_at.is_not(None), EXECUTIONS.c.final.is_(False)),
    )
    # Execution ids repeat across tool instances. An operation that names no source is
    # matched only by an id no other source also has, and only within its own workflow: a
    # blocking hold from a stranger's failure would stop a healthy write (the
    # unknown_outcome deadline still catches an operation this leaves unmatched).
    other = EXECUTIONS.alias("other")
    ambiguous = sa.exists().where(
        other.c.external_id == EXECUTIONS.c.external_id,
        other.c.source != EXECUTIONS.c.source,
    )
    same_workflow = sa.or_(
        OPS.c.workflow_id.is_(None),
        EXECUTIONS.c.workflow_id.is_(None),
        OPS.c.workflow_id == EXECUTIONS.c.workflow_id,
    )
    ours = sa.or_(
        OPS.c.source == EXECUTIONS.c.source,
        sa.and_(OPS.c.source.is_(None), same_workflow, ~ambiguous),
    )
    return OPS.c.state == State.DISPATCHING.value, ours, failed, _unheld(_FAILED_KEY)


_FAILED_JOIN = OPS.join(EXECUTIONS, EXECUTIONS.c.external_id == OPS.c.execution_id)
_FAILED_DUE = _failed_due()
_FAILED_ORDER = (OPS.c.updated_at, OPS.c.operation_id)  # the events' order
_FAILED_IDS = sa.select(*_FAILED_ORDER).select_from(_FAILED_JOIN).where(*_FAILED_DUE)
_FAILED_ROWS = sa.select(
    *(OPS.c[c] for c in DUE_COLUMNS),
    EXECUTIONS.c.status.label("execution_status"),
    EXECUTIONS.c.gone_at.label("execution_gone_at"),
    _FAILED_KEY.label("cause_key"),
).select_from(_FAILED_JOIN)


def failed_walk() -> Walk:
    return Walk(*_FAILED_ORDER)


def failed_candidates(conn: sa.Connection, walk: Walk, limit: int) -> list[str]:
    """The ids of the next ``limit`` dispatching operations whose execution failed, read
    without a lock; the walk is told what it saw."""
    rows = conn.execute(walk.page(_FAILED_IDS, limit)).all()
    walk.saw(rows)
    return [r.operation_id for r in rows]


def failed_rows(conn: sa.Connection, listed: Listed) -> Sequence[Any]:
    """The operations of ``listed``'s chunk still due (a confirm may have settled one since
    their ids were read), locked, with their execution's status and ``gone_at``."""
    stmt = _FAILED_ROWS.where(OPS.c.operation_id.in_(listed.chunk), *_FAILED_DUE)
    rows = conn.execute(skip_locked(conn, stmt.order_by(*_FAILED_ORDER), OPS)).all()
    listed.saw(rows)
    return rows


# ---------------------------------------------------------------- executions, sources, holds

_STUCK_ROWS = sa.select(
    EXECUTIONS.c.id, EXECUTIONS.c.source, EXECUTIONS.c.external_id, EXECUTIONS.c.started_at
)
_STUCK_UNHELD = _unheld(
    sql_cause_key(
        Reason.EXECUTION_STUCK, source=EXECUTIONS.c.source, execution_id=EXECUTIONS.c.external_id
    )
)


def stuck_walk() -> Walk:
    return Walk(EXECUTIONS.c.started_at, EXECUTIONS.c.id)


def stuck_executions(
    conn: sa.Connection, walk: Walk, started_by: datetime, limit: int
) -> Sequence[Any]:
    """The next page of executions still running (and still in the tool) since
    ``started_by`` or before, without an ``execution_stuck`` hold; not locked (the hold blocks
    nothing, and no writer changes these rows but the sync)."""
    stmt = _STUCK_ROWS.where(
        EXECUTIONS.c.final.is_(False),
        EXECUTIONS.c.status == staleness.RUNNING_EXECUTION_STATUS,
        EXECUTIONS.c.gone_at.is_(None),
        EXECUTIONS.c.started_at <= started_by,
        _STUCK_UNHELD,
    )
    rows = conn.execute(walk.page(stmt, limit)).all()
    walk.saw(rows)
    return rows


def sources_named(conn: sa.Connection, names: Sequence[str]) -> Sequence[Any]:
    """The stored rows (name, last_success_at, first_seen_at) of these sources."""
    return conn.execute(
        sa.select(SOURCES.c.name, SOURCES.c.last_success_at, SOURCES.c.first_seen_at).where(
            SOURCES.c.name.in_(names)
        )
    ).all()


_OVERDUE_ROWS = sa.select(
    HOLDS.c.id,
    HOLDS.c.reason,
    HOLDS.c.deadline,
    HOLDS.c.operation_id,
    HOLDS.c.execution_id,
    HOLDS.c.source,
)


def overdue_holds(
    conn: sa.Connection, now: datetime, after: Sequence[Any], limit: int
) -> Sequence[Any]:
    """Up to ``limit`` open holds past their deadline at ``now`` (overdue holds themselves
    excepted), in (deadline, id) order after ``after`` (a (deadline, id) pair, or empty for
    the first page), locked."""
    stmt = (
        _OVERDUE_ROWS.where(
            HOLDS.c.resolved_at.is_(None),
            HOLDS.c.deadline <= now,
            HOLDS.c.reason != Reason.OVERDUE.value,
        )
        .order_by(HOLDS.c.deadline, HOLDS.c.id)
        .limit(limit)
    )
    if after:
        deadline, hold_id = after
        stmt = stmt.where(
            sa.or_(
                HOLDS.c.deadline > deadline,
                sa.and_(HOLDS.c.deadline == deadline, HOLDS.c.id > hold_id),
            )
        )
    return conn.execute(skip_locked(conn, stmt, HOLDS)).all()
