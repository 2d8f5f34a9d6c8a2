"""What the person on duty pages through, in the terminal UI and the handover report: the
hold queue with its filters, searches over executions, recent events and resolutions.

Every list is bounded by a ``limit`` and ordered by an indexed column (or over open holds
only, which the ``(resolved_at, deadline)`` index already narrows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.queries.chain import head
from flowledger.queries.records import (
    ATTEMPTS,
    EVENTS,
    EXECUTIONS,
    EXECUTIONS_ORDER,
    HOLDS,
    OPS,
    event_dict,
    executions_after,
    list_sources,
    row_dict,
)
from flowledger.storage.engine import Store
from flowledger.storage.models import LedgerMeta, table

# --------------------------------------------------------------------------- operator views
# The terminal UI and the handover report page through these; every list is bounded by a
# ``limit`` and ordered by an indexed column (or over open holds only, which the
# ``(resolved_at, deadline)`` index already narrows).

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
_FILTER_FIELDS = {
    "reason": HOLDS.c.reason,
    "owner": HOLDS.c.owner,
    "op": HOLDS.c.operation_id,
    "state": OPS.c.state,
    "workflow": OPS.c.workflow_id,
    "source": HOLDS.c.source,
}


@dataclass(frozen=True)
class HoldFilter:
    """What the queue shows: free words (each must appear in the operation, reason, owner,
    workflow, detail or next action), ``field:value`` pairs, and ``overdue`` / ``blocking``."""

    words: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()
    overdue: bool = False
    blocking: bool = False

    @classmethod
    def parse(cls, text: str) -> HoldFilter:
        words: list[str] = []
        fields: list[tuple[str, str]] = []
        overdue = blocking = False
        for token in text.split():
            name, sep, value = token.partition(":")
            if sep and name.lower() in _FILTER_FIELDS and value:
                fields.append((name.lower(), value))
            elif token.lower() == "overdue":
                overdue = True
            elif token.lower() == "blocking":
                blocking = True
            else:
                words.append(token)
        return cls(tuple(words), tuple(fields), overdue, blocking)


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _contains(column: Any, text: str) -> Any:
    return sa.func.lower(sa.func.coalesce(column, "")).like(_like(text), escape="\\")


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
        where.append(
            sa.or_(
                *(
                    _contains(col, word)
                    for col in (
                        HOLDS.c.operation_id,
                        HOLDS.c.reason,
                        HOLDS.c.owner,
                        HOLDS.c.detail,
                        HOLDS.c.next_action,
                        HOLDS.c.source,
                        OPS.c.workflow_id,
                    )
                )
            )
        )
    for name, value in flt.fields:
        where.append(_contains(_FILTER_FIELDS[name], value))
    if flt.overdue:
        where.append(HOLDS.c.deadline <= now)
    if flt.blocking:
        where.append(HOLDS.c.blocking.is_(True))
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
    stmt, keyset = _queue_stmt(flt, now, sort, descending, after)
    stmt = stmt.limit(limit).offset(0 if keyset else offset)
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


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
        rows = hold_queue(
            store,
            now,
            flt=flt,
            sort=sort,
            descending=descending,
            limit=limit,
            offset=offset,
            after=after,
        )
        return QueueSearch(rows, None, 0)
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
    with store.reader.connect() as conn:
        end = conn.execute(edge).first()
        through = row_dict(end) if end is not None else None
        stmt, _ = _queue_stmt(flt, now, sort, descending, after, through)
        rows = [row_dict(r) for r in conn.execute(stmt.limit(limit))]
    resume = through if through is not None and len(rows) < limit else None
    return QueueSearch(rows, resume, window if through is not None else 0)


# A filter that is matched row by row (words, ``field:value``, ``blocking``) is counted only
# where the open holds are no more than this, the most a search reads at once; past that the
# count would read every open hold, and the list says "N+ rows" until its search ends.
COUNT_WINDOW = SEARCH_WINDOW_MAX


def count_hold_queue(
    store: Store, now: datetime, *, flt: HoldFilter = HoldFilter(), window: int | None = None
) -> int | None:
    """How many open holds ``flt`` lets through. No filter, or ``overdue`` alone, is a range
    of the open holds' index and is counted whatever its size; any other filter only when
    there are at most ``window`` (default :data:`COUNT_WINDOW`) open holds, else ``None``."""
    window = COUNT_WINDOW if window is None else window
    if flt != HoldFilter(overdue=flt.overdue):
        beyond = sa.select(HOLDS.c.id).where(HOLDS.c.resolved_at.is_(None)).offset(window).limit(1)
        with store.reader.connect() as conn:
            if conn.execute(beyond).first() is not None:
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


def search_executions(
    store: Store, *, text: str = "", after_id: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Kept executions, most recently started first (queued ones by when the ledger first saw
    them) as the CLI lists them, ``gone`` ones included. Keyset paging: pass the last row's
    ``id`` as ``after_id`` for the next page."""
    stmt = sa.select(EXECUTIONS).order_by(*EXECUTIONS_ORDER).limit(limit)
    for word in text.split():
        if word.lower() == "gone":
            stmt = stmt.where(EXECUTIONS.c.gone_at.is_not(None))
            continue
        stmt = stmt.where(
            sa.or_(
                *(
                    _contains(col, word)
                    for col in (
                        EXECUTIONS.c.external_id,
                        EXECUTIONS.c.workflow_id,
                        EXECUTIONS.c.workflow_name,
                        EXECUTIONS.c.status,
                        EXECUTIONS.c.source,
                    )
                )
            )
        )
    with store.reader.connect() as conn:
        if after_id is not None:
            paged = executions_after(conn, stmt, after_id)
            if paged is None:
                return []
            stmt = paged
        return [row_dict(r) for r in conn.execute(stmt)]


def source_urls(store: Store) -> dict[str, tuple[str, str | None]]:
    """Each source's kind and base URL, to link an execution to the tool's own page."""
    return {s["name"]: (s["kind"], s["base_url"]) for s in list_sources(store)}


@dataclass(frozen=True)
class EventPage:
    """A page of the event log and the chain's head it was read under. A search by words
    reads a window of sequence numbers (as :class:`QueueSearch`): ``resume`` is the ``seq``
    the next page ends before when the window ended before ``limit`` events matched, and
    ``read`` how many events the window covered."""

    head_seq: int
    head_hash: str
    rows: list[dict[str, Any]]
    resume: dict[str, Any] | None = None
    read: int = 0


def event_page(
    store: Store,
    *,
    before_seq: int | None = None,
    text: str = "",
    limit: int = 200,
    window: int | None = None,
) -> EventPage:
    """The newest events first, keyset paged by sequence number, with the chain's head from
    the same read: the head is read first and no event after it is listed (an event and the
    head that names it are committed together), so a list never runs ahead of its header.
    With words and a ``window``, at most ``window`` events (a range of sequence numbers, the
    primary key) are read: a word that matches nothing answers after one window instead of
    after reading the whole log."""
    words = text.split()
    with store.reader.connect() as conn:
        seq, digest = head(conn)
        top = seq if before_seq is None else min(seq, before_seq - 1)
        stmt = (
            sa.select(EVENTS).where(EVENTS.c.seq <= top).order_by(EVENTS.c.seq.desc()).limit(limit)
        )
        windowed = bool(words) and window is not None
        bottom = max(1, top - window + 1) if windowed and window is not None else 1
        if bottom > 1:
            stmt = stmt.where(EVENTS.c.seq >= bottom)
        for word in words:
            stmt = stmt.where(
                sa.or_(
                    *(
                        _contains(col, word)
                        for col in (EVENTS.c.kind, EVENTS.c.actor, EVENTS.c.operation_id)
                    )
                )
            )
        rows = [event_dict(r) for r in conn.execute(stmt)]
    resume = {"seq": bottom} if bottom > 1 and len(rows) < limit else None
    return EventPage(seq, digest, rows, resume, max(0, top - bottom + 1) if windowed else 0)


def recent_events(
    store: Store, *, before_seq: int | None = None, text: str = "", limit: int = 200
) -> list[dict[str, Any]]:
    """The newest events first, keyset paged by sequence number."""
    return event_page(store, before_seq=before_seq, text=text, limit=limit).rows


def attempts_by_execution(
    store: Store, external_id: str, source: str | None = None, *, limit: int = 100
) -> list[dict[str, Any]]:
    """The dispatches an execution made (the ``attempts.execution_id`` index), newest first,
    with their operation's state now."""
    stmt = (
        sa.select(ATTEMPTS, OPS.c.state.label("operation_state"))
        .join(OPS, OPS.c.operation_id == ATTEMPTS.c.operation_id)
        .where(ATTEMPTS.c.execution_id == external_id)
        .order_by(ATTEMPTS.c.dispatched_at.desc(), ATTEMPTS.c.id.desc())
        .limit(limit)
    )
    if source is not None:
        stmt = stmt.where(sa.or_(ATTEMPTS.c.source.is_(None), ATTEMPTS.c.source == source))
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def resolved_holds(
    store: Store, since: datetime, until: datetime, *, after_id: int = 0, limit: int = 1000
) -> list[dict[str, Any]]:
    """Holds resolved in ``[since, until)``, oldest resolution first, keyset paged by id
    within the window (the ``(resolved_at, deadline)`` index bounds the scan)."""
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
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def chain_head(store: Store) -> tuple[int, str]:
    with store.reader.connect() as conn:
        return head(conn)


def is_demo(store: Store) -> bool:
    """Whether this ledger was built by ``flowledger demo`` (its data is made up)."""
    meta = table(LedgerMeta)
    with store.reader.connect() as conn:
        value = conn.execute(
            sa.select(meta.c.value).where(meta.c.key == "demo")
        ).scalar_one_or_none()
    return value is not None


def executions_by_ref(
    store: Store, external_ids: list[str], source: str | None = None
) -> list[dict[str, Any]]:
    """The kept copies of the executions named (a hold may name one without an operation),
    only ``source``'s when it is known."""
    if not external_ids:
        return []
    stmt = sa.select(EXECUTIONS).where(EXECUTIONS.c.external_id.in_(external_ids))
    if source is not None:
        stmt = stmt.where(EXECUTIONS.c.source == source)
    with store.reader.connect() as conn:
        rows = conn.execute(stmt.order_by(EXECUTIONS.c.id)).all()
    return [row_dict(r) for r in rows]
