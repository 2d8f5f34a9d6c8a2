"""Every operation, as the person on shift looks for one: a page of the most recently changed,
narrowed by state and text; an id found from what was typed; and the dispatches an operation
turned away (``dispatch_held``: another execution is writing, a blocking hold, a cancelled
operation), which open no hold of their own.

Paging is keyset on ``(updated_at, operation_id)``, read through the ``(state, updated_at)``
index: one ordered range per state, merged, so the first page costs a few index steps per
state whatever the ledger's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from flowledger.domain import State
from flowledger.queries.duty import SEARCH_WINDOW, _contains
from flowledger.queries.records import EVENTS, HOLDS, OPS, event_dict, row_dict
from flowledger.storage.engine import Store

STATES = tuple(s.value for s in State)
_WORD_COLUMNS = (OPS.c.operation_id, OPS.c.execution_id, OPS.c.workflow_id, OPS.c.receipt)


@dataclass(frozen=True)
class OperationFilter:
    """``state:NAME`` (or a state's name alone; several widen the list) and free words, each
    of which must appear in the operation id, its last execution, workflow or receipt."""

    states: tuple[str, ...] = ()
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> OperationFilter:
        states: list[str] = []
        words: list[str] = []
        for token in text.split():
            name, sep, value = token.partition(":")
            wanted = value.lower() if sep and name.lower() == "state" else token.lower()
            if wanted in STATES:
                states.append(wanted)
            else:
                words.append(token)
        return cls(tuple(dict.fromkeys(states)), tuple(words))


@dataclass(frozen=True)
class After:
    """Where the previous page ended: its last row's change time and id."""

    updated_at: Any
    operation_id: str


def _branch(
    state: str,
    flt: OperationFilter,
    after: After | None,
    limit: int,
    through: After | None = None,
) -> Any:
    """One state's operations, newest change first: a range of its ``(state, updated_at)``
    index (down to ``through``, included, when a windowed search gives one)."""
    stmt = sa.select(OPS.c.operation_id, OPS.c.updated_at).where(OPS.c.state == state)
    for word in flt.words:
        stmt = stmt.where(sa.or_(*(_contains(col, word) for col in _WORD_COLUMNS)))
    if through is not None:
        stmt = stmt.where(
            OPS.c.updated_at >= through.updated_at,
            sa.or_(
                OPS.c.updated_at > through.updated_at,
                OPS.c.operation_id >= through.operation_id,
            ),
        )
    if after is not None:
        # "<=" first, so that the index range starts where the last page ended.
        stmt = stmt.where(
            OPS.c.updated_at <= after.updated_at,
            sa.or_(
                OPS.c.updated_at < after.updated_at,
                OPS.c.operation_id < after.operation_id,
            ),
        )
    return stmt.order_by(OPS.c.updated_at.desc(), OPS.c.operation_id.desc()).limit(limit)


def list_operations(
    store: Store,
    *,
    flt: OperationFilter = OperationFilter(),
    after: After | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """One page of operations, most recently changed first, each with its count of open
    holds. Pass the last row as ``After(row["updated_at"], row["operation_id"])`` for the
    next page."""
    stmt = page_statement(flt, after, max(1, min(limit, 1000)))
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def page_statement(
    flt: OperationFilter, after: After | None, limit: int, through: After | None = None
) -> Any:
    """The statement behind :func:`list_operations` (its plan is checked by a test)."""
    branches = [_branch(s, flt, after, limit, through).subquery() for s in flt.states or STATES]
    page = (
        sa.union_all(*(sa.select(b) for b in branches)).subquery()
        if len(branches) > 1
        else branches[0]
    )
    ids = (
        sa.select(page.c.operation_id)
        .order_by(page.c.updated_at.desc(), page.c.operation_id.desc())
        .limit(limit)
        .subquery()
    )
    open_holds = (
        sa.select(sa.func.count())
        .where(HOLDS.c.operation_id == OPS.c.operation_id, HOLDS.c.resolved_at.is_(None))
        .scalar_subquery()
    )
    return (
        sa.select(OPS, open_holds.label("open_holds"))
        .join(ids, ids.c.operation_id == OPS.c.operation_id)
        .order_by(OPS.c.updated_at.desc(), OPS.c.operation_id.desc())
    )


@dataclass(frozen=True)
class OperationSearch:
    """A page of a windowed search (as :class:`flowledger.queries.duty.QueueSearch`): ``resume``
    is where the next page starts when the window ended before ``limit`` rows matched."""

    rows: list[dict[str, Any]]
    resume: dict[str, Any] | None
    read: int


def search_operations(
    store: Store,
    *,
    flt: OperationFilter = OperationFilter(),
    after: After | None = None,
    limit: int = 100,
    window: int = SEARCH_WINDOW,
) -> OperationSearch:
    """:func:`list_operations`, reading at most ``window`` operations of each state when the
    filter has words (a word is found only by reading rows; states alone are index ranges).
    The window ends where the first of the states' next ``window`` rows ends: down to there,
    every state's rows have been read."""
    if not flt.words:
        return OperationSearch(list_operations(store, flt=flt, after=after, limit=limit), None, 0)
    with store.reader.connect() as conn:
        edges = [conn.execute(_edge(s, after, window)).first() for s in flt.states or STATES]
        present = [(e.updated_at, e.operation_id) for e in edges if e is not None]
        through = After(*max(present)) if present else None
        stmt = page_statement(flt, after, max(1, min(limit, 1000)), through)
        rows = [row_dict(r) for r in conn.execute(stmt)]
    resume = (
        {"updated_at": through.updated_at, "operation_id": through.operation_id}
        if through is not None and len(rows) < limit
        else None
    )
    return OperationSearch(rows, resume, window * len(present))


def _edge(state: str, after: After | None, window: int) -> Any:
    """The ``window``-th of one state's operations after ``after`` (from its index alone)."""
    return _branch(state, OperationFilter(), after, 1).offset(window - 1)


def count_operations(store: Store, *, flt: OperationFilter = OperationFilter()) -> int | None:
    """How many operations the filter lets through; ``None`` when words would make it read
    every row (a page is shown without its total then)."""
    if flt.words:
        return None
    stmt = sa.select(sa.func.count()).select_from(OPS)
    if flt.states:
        stmt = stmt.where(OPS.c.state.in_(flt.states))
    with store.reader.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def find_operation_ids(store: Store, typed: str, *, limit: int = 10) -> list[str]:
    """Operation ids for what was typed: the exact id first, then ids starting with it (a
    range of the primary key, so as fast on ten million operations as on ten)."""
    typed = typed.strip()
    if not typed:
        return []
    with store.reader.connect() as conn:
        exact = conn.execute(
            sa.select(OPS.c.operation_id).where(OPS.c.operation_id == typed)
        ).scalar_one_or_none()
        # ">= typed" and "< typed + the highest character" walk the index; the LIKE keeps
        # only ids that really start so where a collation orders text by other rules.
        escaped = typed.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        prefixed = conn.execute(
            sa.select(OPS.c.operation_id)
            .where(
                OPS.c.operation_id >= typed,
                OPS.c.operation_id < typed + "\U0010ffff",
                OPS.c.operation_id.like(escaped + "%", escape="\\"),
            )
            .order_by(OPS.c.operation_id)
            .limit(limit)
        ).scalars()
        found = [exact] if exact is not None else []
        found += [i for i in prefixed if i != exact]
    return found[:limit]


def turned_away(store: Store, operation_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The dispatches this operation answered ``hold``, newest first: each ``dispatch_held``
    event with the execution that asked, the reason, and (for ``in_flight``) the execution
    that was writing."""
    stmt = (
        sa.select(EVENTS)
        .where(EVENTS.c.operation_id == operation_id, EVENTS.c.kind == "dispatch_held")
        .order_by(EVENTS.c.seq.desc())
        .limit(limit)
    )
    with store.reader.connect() as conn:
        return [event_dict(r) for r in conn.execute(stmt)]
