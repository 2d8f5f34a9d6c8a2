"""The process's Prometheus metrics, in one registry that ``/metrics`` exposes.

Other parts of the ledger add their gauges here, so one scrape sees the whole process. The
registry is the library's own ``CollectorRegistry`` (not the global default), so tests that
build several apps in one process never register a name twice.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

REQUEST_LATENCY = Histogram(
    "flowledger_http_request_duration_seconds",
    "Time from a request's first byte to its answer, by route template.",
    ["route", "method", "status"],
    registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

DISPATCH_DECISIONS = Counter(
    "flowledger_dispatch_decisions_total",
    "Dispatch answers given (replays of an Idempotency-Key are not counted again).",
    ["decision", "reason"],
    registry=REGISTRY,
)

COMMIT_BATCH_SIZE = Histogram(
    "flowledger_commit_batch_units",
    "Requests that shared one group commit (SQLite).",
    registry=REGISTRY,
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)

REFUSED_CONNECTIONS = Counter(
    "flowledger_refused_connections",
    "Connections answered 429 and closed as they were accepted: their client address held"
    " max_connections_per_client connections already.",
    registry=REGISTRY,
)

DB_ROUND_TRIPS = Counter(
    "flowledger_db_round_trips",
    "Exchanges with PostgreSQL that a write transaction waited for: statements run one at a"
    " time, flushes and syncs of a pipeline, the commit.",
    registry=REGISTRY,
)

WAL_CHECKPOINTS_SHORT = Counter(
    "flowledger_wal_checkpoints_short",
    "The ledger's WAL checkpoints (SQLite builds with the WAL-reset bug) that a reader on an"
    " older snapshot, such as a backup, left short: the next one copies the rest.",
    registry=REGISTRY,
)


# The labelled children the receiver observes on every request, each looked up once:
# ``labels()`` checks and joins its values on every call (bench/README.md, "Receiver engine").
# The label values are route templates, methods, statuses and decisions: as few children as
# ``labels()`` itself would make.


@cache
def request_latency(route: str, method: str, status: int) -> Any:
    """:data:`REQUEST_LATENCY`'s child for one route template, method and status."""
    return REQUEST_LATENCY.labels(route, method, str(status))


@cache
def dispatch_decision(decision: str, reason: str) -> Any:
    """:data:`DISPATCH_DECISIONS`'s child for one decision and reason."""
    return DISPATCH_DECISIONS.labels(decision, reason)
