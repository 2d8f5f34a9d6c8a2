"""The event log as the person on duty pages through it: newest first, searched by words a
window of sequence numbers at a time, with the chain's head it was read under."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowledger.queries.records import event_dict
from flowledger.storage.engine import Store
from flowledger.storage.views import events
from flowledger.storage.views.chain import head


@dataclass(frozen=True)
class EventPage:
    """A page of the event log and the chain's head it was read under. A search by words
    reads a window of sequence numbers (as :class:`~flowledger.queries.holds.QueueSearch`):
    ``resume`` is the ``seq`` the next page ends before when the window ended before
    ``limit`` events matched, and ``read`` how many events the window covered."""

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
        windowed = bool(words) and window is not None
        bottom = max(1, top - window + 1) if windowed and window is not None else 1
        found = events.newest(conn, top, bottom=bottom, words=words, limit=limit)
        rows = [event_dict(r) for r in found]
    resume = {"seq": bottom} if bottom > 1 and len(rows) < limit else None
    return EventPage(seq, digest, rows, resume, max(0, top - bottom + 1) if windowed else 0)


def recent_events(
    store: Store, *, before_seq: int | None = None, text: str = "", limit: int = 200
) -> list[dict[str, Any]]:
    """The newest events first, keyset paged by sequence number."""
    return event_page(store, before_seq=before_seq, text=text, limit=limit).rows


def hold_notes(
    store: Store, hold_id: int, operation_id: str | None, *, limit: int = 200
) -> list[dict[str, Any]]:
    """What people wrote on a hold, oldest first: each of its events with a note (assigned,
    extended, noted, resolved), as the event recorded it."""
    with store.reader.connect() as conn:
        found = events.of_hold(conn, hold_id, operation_id, limit=limit)
    return [e for e in (event_dict(r) for r in found) if e["data"].get("note")]
