"""The hold queue the person on duty pages through, in the terminal UI and the handover
report: its filter, pages by key or offset, windowed searches, counts, one hold, and the
holds resolved during a shift.

Every list is bounded by a ``limit`` and ordered by an indexed column (or over open holds
only, which the ``(resolved_at, deadline)`` index already narrows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowledger.storage.engine import Store
from flowledger.storage.views import holds as rows
from flowledger.storage.views.holds import KEYSET_SORTS, QUEUE_SORTS

__all__ = [
    "COUNT_WINDOW",
    "KEYSET_SORTS",
    "QUEUE_SORTS",
    "SEARCH_WINDOW",
    "SEARCH_WINDOW_MAX",
    "HoldFilter",
    "QueueSearch",
    "count_hold_queue",
    "hold",
    "hold_queue",
    "resolved_holds",
    "search_hold_queue",
]


@dataclass(frozen=True)
class HoldFilter:
    """What the queue shows: free words (each must appear in the operation, reason, owner,
    workflow, detail or next action), ``field:value`` pairs, and ``overdue`` / ``blocking``."""

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
            if sep and name.lower() in rows.FILTER_FIELDS and value:
                fields.append((name.lower(), value))
            elif token.lower() == "overdue":
                overdue = True
            elif token.lower() == "blocking":
                blocking = True
            else:
                words.append(token)
        return cls(tuple(words), tuple(fields), overdue, blocking)


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
        return rows.queue(
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
        through = rows.window_end(conn, window, descending=descending, after=after)
        found = rows.queue(
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
    there are at most ``window`` (default :data:`COUNT_WINDOW`) open holds, else ``None``."""
    window = COUNT_WINDOW if window is None else window
    if flt != HoldFilter(overdue=flt.overdue):
        with store.reader.connect() as conn:
            if rows.more_open_than(conn, window):
                return None
    with store.reader.connect() as conn:
        return rows.count_queue(conn, flt, now)


def hold(store: Store, hold_id: int) -> dict[str, Any] | None:
    """One hold, with what its operation's state and receipt conflicts allow (as the queue)."""
    with store.reader.connect() as conn:
        return rows.hold(conn, hold_id)


def resolved_holds(
    store: Store, since: datetime, until: datetime, *, after_id: int = 0, limit: int = 1000
) -> list[dict[str, Any]]:
    """Holds resolved in ``[since, until)``, oldest resolution first, keyset paged by id
    within the window (the ``(resolved_at, deadline)`` index bounds the scan)."""
    with store.reader.connect() as conn:
        return rows.resolved(conn, since, until, after_id=after_id, limit=limit)
