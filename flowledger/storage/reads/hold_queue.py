"""The hold queue the person on duty pages through, in the terminal UI, the CLI and the
handover report: the open holds with their operation's state and workflow, whether it has an
open receipt conflict and the status of the execution they concern; its filter, pages by key
or offset, windowed searches, counts, one hold, and the open holds by deadline alone.

Every list is bounded by a ``limit`` and ordered by an indexed column (or over open holds
only, which the ``(resolved_at, deadline)`` index already narrows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Execution, Hold, Operation, table
from flowledger.storage.reads import Connection, contains, row_dict

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


@dataclass(frozen=True)
class HoldFilter:
    """What the queue shows: free words (each must appear in the operation, reason, owner,
    workflow, detail or next action), ``field:value`` pairs (names of
    :data:`FILTER_FIELDS`), and ``overdue`` / ``blocking``."""

    words: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    overdue: bool = False
    blocking: bool = False
    reason: str | None = None  # exactly this reason (``reason:`` pairs match words of it)

    @classmethod
    def of(cls, *, reason: str | None, owner: str | None, overdue: bool) -> HoldFilter:
        """The filter of ``flowledger holds`` and ``GET /v1/holds``: one reason, an owner
        (as the queue's ``owner:`` pair finds it), past the deadline."""
        return cls(fields=(("owner", owner),) if owner else (), overdue=overdue, reason=reason)

    @classmethod
    def parse(cls, text: str) -> HoldFilter:
        words: list[str] = []
        fields: list[tuple[str, str]] = []
        overdue = blocking = False
        for token in text.split():
            name, sep, value = token.partition(":")
            if sep and name.lower() in FILTER_FIELDS and value:
                fields.append((name.lower(), value))
            elif token.lower() == "overdue":
                overdue = True
            elif token.lower() == "blocking":
                blocking = True
            else:
                words.append(token)
        return cls(tuple(words), tuple(fields), overdue, blocking)


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


def _queue_where(flt: HoldFilter, now: datetime) -> list[Any]:
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
    flt: HoldFilter,
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


def _page(
    conn: Connection,
    flt: HoldFilter,
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


def hold_queue(
    store: Store,
    now: datetime,
    *,
    flt: HoldFilter = HoldFilter(),
    sort: str = "deadline",
    descending: bool = False,
    limit: int = 100,
    offset: int = 0,
    after: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One page of the attention queue: open holds with their operation's state and workflow,
    whether it has an open receipt conflict, and the status of the execution they concern.
    The next page: pass the last row as ``after`` (it pages by key where the sort allows,
    else by ``offset``, which must then be the rows already read)."""
    with store.reader.connect() as conn:
        return _page(
            conn,
            flt,
            now,
            sort=sort,
            descending=descending,
            limit=limit,
            offset=offset,
            after=after,
        )


# A filtered queue in deadline order (the default) is searched a window of open holds at a
# time, read in the order of the ``(resolved_at, deadline)`` index: a filter that matches
# little or nothing reads one window per call instead of every open hold. The UI starts with
# SEARCH_WINDOW and goes on with windows as large as what it has read (so the holds read
# double each call), up to SEARCH_WINDOW_MAX.
SEARCH_WINDOW = 2_000
SEARCH_WINDOW_MAX = 64_000


@dataclass(frozen=True)
class QueueSearch:
    """A page of a windowed queue search. ``resume``: the last hold the window covered, when
    the window ended before ``limit`` rows matched (the next page starts after it, not after
    the last row); ``None`` once the rows end a page or the open holds end. ``read``: how
    many open holds the window covered."""

    rows: list[dict[str, Any]]
    resume: dict[str, Any] | None
    read: int


def _window_end(
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


def search_hold_queue(
    store: Store,
    now: datetime,
    *,
    flt: HoldFilter = HoldFilter(),
    sort: str = "deadline",
    descending: bool = False,
    limit: int = 100,
    offset: int = 0,
    after: dict[str, Any] | None = None,
    window: int = SEARCH_WINDOW,
) -> QueueSearch:
    """:func:`hold_queue`, reading at most ``window`` open holds when a filter is set and the
    queue is in deadline order (other sorts read every open hold to order them anyway)."""
    if sort != "deadline" or flt == HoldFilter():
        found = hold_queue(
            store,
            now,
            flt=flt,
            sort=sort,
            descending=descending,
            limit=limit,
            offset=offset,
            after=after,
        )
        return QueueSearch(found, None, 0)
    with store.reader.connect() as conn:
        through = _window_end(conn, window, descending=descending, after=after)
        found = _page(
            conn,
            flt,
            now,
            sort=sort,
            descending=descending,
            limit=limit,
            after=after,
            through=through,
        )
    resume = through if through is not None and len(found) < limit else None
    return QueueSearch(found, resume, window if through is not None else 0)


# A filter that is matched row by row (words, ``field:value``, ``blocking``) is counted only
# where the open holds are no more than this, the most a search reads at once; past that the
# count would read every open hold, and the list says "N+ rows" until its search ends.
COUNT_WINDOW = SEARCH_WINDOW_MAX


def count_hold_queue(
    store: Store, now: datetime, *, flt: HoldFilter = HoldFilter(), window: int | None = None
) -> int | None:
    """How many open holds ``flt`` lets through. No filter, or ``overdue`` alone, is a range
    of the open holds' index and is counted whatever its size; any other filter only when
    there are at most ``window`` (default :data:`COUNT_WINDOW`) open holds, else ``None``.
    The operations are joined only when the filter reads their columns."""
    window = COUNT_WINDOW if window is None else window
    if flt != HoldFilter(overdue=flt.overdue):
        beyond = sa.select(HOLDS.c.id).where(HOLDS.c.resolved_at.is_(None)).offset(window)
        with store.reader.connect() as conn:
            if conn.execute(beyond.limit(1)).first() is not None:
                return None
    stmt = (
        sa.select(sa.func.count())
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(*_queue_where(flt, now))
    )
    if not flt.words and not any(name in ("state", "workflow") for name, _ in flt.fields):
        stmt = sa.select(sa.func.count()).select_from(HOLDS).where(*_queue_where(flt, now))
    with store.reader.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def hold(store: Store, hold_id: int) -> dict[str, Any] | None:
    """One hold, with what its operation's state and receipt conflicts allow (as the queue)."""
    stmt = (
        sa.select(HOLDS, OPS.c.state.label("operation_state"), _conflict())
        .select_from(HOLDS.outerjoin(OPS, OPS.c.operation_id == HOLDS.c.operation_id))
        .where(HOLDS.c.id == hold_id)
    )
    with store.reader.connect() as conn:
        row = conn.execute(stmt).first()
    return row_dict(row) if row is not None else None


def list_open_holds(
    store: Store, *, limit: int = 100, offset: int = 0, reason: str | None = None
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
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def count_open(conn: Connection) -> int:
    """How many holds are open."""
    return int(
        conn.execute(sa.select(sa.func.count()).where(HOLDS.c.resolved_at.is_(None))).scalar_one()
    )
