"""The operator's views under the module name the terminal UI and its tests still import:
the hold queue (:mod:`~flowledger.queries.holds`), executions
(:mod:`~flowledger.queries.executions`), the event log (:mod:`~flowledger.queries.events`)
and facts about the ledger. New code imports those modules instead."""

from flowledger.queries.chain import chain_head
from flowledger.queries.events import EventPage, event_page, recent_events
from flowledger.queries.executions import (
    attempts_by_execution,
    executions_by_ref,
    search_executions,
    source_urls,
)
from flowledger.queries.holds import (
    COUNT_WINDOW,
    KEYSET_SORTS,
    QUEUE_SORTS,
    SEARCH_WINDOW,
    SEARCH_WINDOW_MAX,
    HoldFilter,
    QueueSearch,
    count_hold_queue,
    hold,
    hold_queue,
    resolved_holds,
    search_hold_queue,
)
from flowledger.queries.records import is_demo

__all__ = [
    "COUNT_WINDOW",
    "KEYSET_SORTS",
    "QUEUE_SORTS",
    "SEARCH_WINDOW",
    "SEARCH_WINDOW_MAX",
    "EventPage",
    "HoldFilter",
    "QueueSearch",
    "attempts_by_execution",
    "chain_head",
    "count_hold_queue",
    "event_page",
    "executions_by_ref",
    "hold",
    "hold_queue",
    "is_demo",
    "recent_events",
    "resolved_holds",
    "search_executions",
    "search_hold_queue",
    "source_urls",
]
