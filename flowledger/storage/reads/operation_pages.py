"""Every operation, as the person on shift looks for one: a page of the most recently changed,
narrowed by state and text; an id found from what was typed; and the dispatches an operation
turned away (``dispatch_held``: another execution is writing, a blocking hold, a cancelled
operation), which open no hold of their own.

Paging is keyset on ``(updated_at, operation_id)``, read through the ``(state, updated_at)``
index: one ordered range per state, merged, so the first page costs a few index steps per
state whatever the ledger's size. The API pages by id instead; one operation's row, ids by
prefix and counts are read here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from flowledger.domain import State
from flowledger.storage.engine import Store
from flowledger.storage.models import Hold, Operation, table
from flowledger.storage.reads import Connection, contains, row_dict
from flowledger.storage.reads.event_log import event_dict, of_kind
from flowledger.storage.reads.hold_queue import SEARCH_WINDOW

OPS = table(Operation)
HOLDS = table(Hold)
_WORD_COLUMNS = (OPS.c.operation_id, OPS.c.execution_id, OPS.c.workflow_id, OPS.c.receipt)

# Where a page ends: its last row's (updated_at, operation_id).
Key = tuple[Any, str]


def operation(conn: Connection, operation_id: str) -> Any:
    """The operation's row, or None."""
    return conn.execute(sa.select(OPS).where(OPS.c.operation_id == operation_id)).first()


def _branch(
    state: str, words: Sequence[str], after: Key | None, limit: int, through: Key | None = None
) -> Any:
    """One state's operations, newest change first: a range of its ``(state, updated_at)``
    index (down to ``through``, included, when a windowed search gives one)."""
    stmt = sa.select(OPS.c.operation_id, OPS.c.updated_at).where(OPS.c.state == state)
    for word in words:
        stmt = stmt.where(sa.or_(*(contains(col, word) for col in _WORD_COLUMNS)))
    if through is not None:
        stmt = stmt.where(
            OPS.c.updated_at >= through[0],
            sa.or_(OPS.c.updated_at > through[0], OPS.c.operation_id >= through[1]),
        )
    if after is not None:
        # "<=" first, so that the index range starts where the last page ended.
        stmt = stmt.where(
            OPS.c.updated_at <= after[0],
            sa.or_(OPS.c.updated_at < after[0], OPS.c.operation_id < after[1]),
        )
    return stmt.order_by(OPS.c.updated_at.desc(), OPS.c.operation_id.desc()).limit(limit)


def page_statement(
    states: Sequence[str],
    words: Sequence[str],
    after: Key | None,
    limit: int,
    through: Key | None = None,
) -> Any:
    """A page of the operations in ``states``, most recently changed first, each with its
    count of open holds (its plan is checked by a test)."""
    branches = [_branch(s, words, after, limit, through).subquery() for s in states]
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


def page(
    conn: Connection,
    states: Sequence[str],
    words: Sequence[str],
    after: Key | None,
    limit: int,
    through: Key | None = None,
) -> list[dict[str, Any]]:
    stmt = page_statement(states, words, after, limit, through)
    return [row_dict(r) for r in conn.execute(stmt)]


def edge(conn: Connection, state: str, after: Key | None, window: int) -> Key | None:
    """The ``window``-th of one state's operations after ``after`` (from its index alone)."""
    row = conn.execute(_branch(state, (), after, 1).offset(window - 1)).first()
    return (row.updated_at, row.operation_id) if row is not None else None


def count(conn: Connection, states: Sequence[str] = ()) -> int:
    stmt = sa.select(sa.func.count()).select_from(OPS)
    if states:
        stmt = stmt.where(OPS.c.state.in_(states))
    return int(conn.execute(stmt).scalar_one())


def count_by_state(conn: Connection) -> dict[str, int]:
    rows = conn.execute(sa.select(OPS.c.state, sa.func.count()).group_by(OPS.c.state)).all()
    return {state: int(n) for state, n in rows}


def by_id(
    store: Store,
    *,
    state: str | None = None,
    hold: str | None = None,
    after: str | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Operations by id, ``limit`` after the id ``after``. ``hold``: ``open``, ``blocking``,
    ``none`` or a reason, over open holds only."""
    stmt = sa.select(OPS).order_by(OPS.c.operation_id).limit(limit)
    if state is not None:
        stmt = stmt.where(OPS.c.state == state)
    if after is not None:
        stmt = stmt.where(OPS.c.operation_id > after)
    if hold is not None:
        open_hold = sa.select(HOLDS.c.id).where(
            HOLDS.c.operation_id == OPS.c.operation_id, HOLDS.c.resolved_at.is_(None)
        )
        if hold == "none":
            stmt = stmt.where(~open_hold.exists())
        elif hold == "open":
            stmt = stmt.where(open_hold.exists())
        elif hold == "blocking":
            stmt = stmt.where(open_hold.where(HOLDS.c.blocking.is_(True)).exists())
        else:
            stmt = stmt.where(open_hold.where(HOLDS.c.reason == hold).exists())
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


STATES = tuple(s.value for s in State)


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


def _key(after: After | None) -> Key | None:
    return (after.updated_at, after.operation_id) if after is not None else None


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
    with store.reader.connect() as conn:
        return page(conn, flt.states or STATES, flt.words, _key(after), max(1, min(limit, 1000)))


@dataclass(frozen=True)
class OperationSearch:
    """A page of a windowed search (as :class:`~flowledger.storage.reads.hold_queue.QueueSearch`):
    ``resume`` is where the next page starts when the window ended before ``limit`` rows
    matched."""

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
    states = flt.states or STATES
    with store.reader.connect() as conn:
        edges = [edge(conn, s, _key(after), window) for s in states]
        present = [e for e in edges if e is not None]
        through = After(*max(present)) if present else None
        found = page(conn, states, flt.words, _key(after), max(1, min(limit, 1000)), _key(through))
    resume = (
        {"updated_at": through.updated_at, "operation_id": through.operation_id}
        if through is not None and len(found) < limit
        else None
    )
    return OperationSearch(found, resume, window * len(present))


def count_operations(store: Store, *, flt: OperationFilter = OperationFilter()) -> int | None:
    """How many operations the filter lets through; ``None`` when words would make it read
    every row (a page is shown without its total then)."""
    if flt.words:
        return None
    with store.reader.connect() as conn:
        return count(conn, flt.states)


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
        return (found + [i for i in prefixed if i != exact])[:limit]


def turned_away(store: Store, operation_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The dispatches this operation answered ``hold``, newest first: each ``dispatch_held``
    event with the execution that asked, the reason, and (for ``in_flight``) the execution
    that was writing."""
    with store.reader.connect() as conn:
        held = of_kind(conn, operation_id, "dispatch_held", limit=limit)
    return [event_dict(r) for r in held]
