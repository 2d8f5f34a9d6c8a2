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

from flowledger.domain import State
from flowledger.queries.holds import SEARCH_WINDOW
from flowledger.queries.records import event_dict
from flowledger.storage.engine import Store
from flowledger.storage.views import events
from flowledger.storage.views import operations as rows

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


def _key(after: After | None) -> rows.Key | None:
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
        return rows.page(
            conn, flt.states or STATES, flt.words, _key(after), max(1, min(limit, 1000))
        )


@dataclass(frozen=True)
class OperationSearch:
    """A page of a windowed search (as :class:`flowledger.queries.holds.QueueSearch`):
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
        edges = [rows.edge(conn, s, _key(after), window) for s in states]
        present = [e for e in edges if e is not None]
        through = After(*max(present)) if present else None
        found = rows.page(
            conn, states, flt.words, _key(after), max(1, min(limit, 1000)), _key(through)
        )
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
        return rows.count(conn, flt.states)


def find_operation_ids(store: Store, typed: str, *, limit: int = 10) -> list[str]:
    """Operation ids for what was typed: the exact id first, then ids starting with it (a
    range of the primary key, so as fast on ten million operations as on ten)."""
    typed = typed.strip()
    if not typed:
        return []
    with store.reader.connect() as conn:
        return rows.ids_for(conn, typed, limit)[:limit]


def turned_away(store: Store, operation_id: str, *, limit: int = 100) -> list[dict[str, Any]]:
    """The dispatches this operation answered ``hold``, newest first: each ``dispatch_held``
    event with the execution that asked, the reason, and (for ``in_flight``) the execution
    that was writing."""
    with store.reader.connect() as conn:
        held = events.of_kind(conn, operation_id, "dispatch_held", limit=limit)
    return [event_dict(r) for r in held]
