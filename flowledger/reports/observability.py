"""Prometheus metrics: what the database says at scrape time, and what the jobs did.

The gauges are read from the database by a custom collector when ``/metrics`` is scraped (a
few grouped counts over indexed columns; nothing is cached that could drift from the ledger).
The job counters live in this process. ``register(registry, store)`` adds both to a registry;
the receiver serves that registry at ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from flowledger.domain import HOLD_REASONS, State
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.storage.engine import Store
from flowledger.storage.reads import gauges, records


class JobMetrics:
    """Counters the scheduler bumps around every job run."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter(
            "flowledger_job_runs", "Scheduled job runs, by job", ["job"], registry=registry
        )
        self.failures = Counter(
            "flowledger_job_failures",
            "Scheduled job runs that raised, by job",
            ["job"],
            registry=registry,
        )
        self.skipped = Counter(
            "flowledger_job_skipped",
            "Job starts skipped because the previous run was still going, by job",
            ["job"],
            registry=registry,
        )
        self.duration = Histogram(
            "flowledger_job_duration_seconds", "Job run time", ["job"], registry=registry
        )


class LedgerCollector(Collector):
    """Holds, operations, sources and the outbox, counted from the database per scrape."""

    def __init__(self, store: Store, clock: Clock = utcnow) -> None:
        self.store = store
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        st = records.status(self.store, now)
        by_state, by_reason, overdue = st.by_state, st.open_holds, st.overdue
        synced, pending = gauges.sources_and_alerts(self.store)
        yield _labelled(
            "flowledger_operations",
            "Operations by state",
            "state",
            {s.value: by_state.get(s.value, 0) for s in State},
        )
        yield _labelled(
            "flowledger_holds_open",
            "Open holds by reason (every reason a hold can have, 0 when none is open)",
            "reason",
            {r.value: by_reason.get(r.value, 0) for r in HOLD_REASONS},
        )
        yield GaugeMetricFamily(
            "flowledger_holds_overdue", "Open holds past their deadline", value=overdue
        )
        twins = CounterMetricFamily(
            "flowledger_duplicate_triggers",
            "Twin triggers: one operation dispatched by two executions of the same workflow"
            " within the twin window, counted on the duplicate_trigger holds, by source",
            labels=["source"],
        )
        for source, count in sorted(st.twin_triggers.items()):
            twins.add_metric([source], count)
        yield twins
        yield GaugeMetricFamily(
            "flowledger_alerts_pending", "Alerts not yet delivered", value=pending
        )
        yield from _source_metrics(synced, now)


def _labelled(name: str, doc: str, label: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family


def _seconds(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


def _source_metrics(sources: Sequence[Any], now: datetime) -> Iterator[GaugeMetricFamily]:
    lag = GaugeMetricFamily(
        "flowledger_source_sync_lag_seconds",
        "Seconds since the source's last successful sync (absent: never synced)",
        labels=["source"],
    )
    success = GaugeMetricFamily(
        "flowledger_source_last_success_timestamp_seconds",
        "When the source last synced successfully (0: never)",
        labels=["source"],
    )
    failing = GaugeMetricFamily(
        "flowledger_source_failing",
        "1 when the source's last sync ended in an error",
        labels=["source"],
    )
    error_at = GaugeMetricFamily(
        "flowledger_source_last_error_timestamp_seconds",
        "When the source's last sync error happened (0: none)",
        labels=["source"],
    )
    for row in sources:
        name = row.name
        ok_at = row.last_success_at
        err_at = row.last_error_at
        if ok_at is not None:
            lag.add_metric([name], max(0.0, (now - ok_at).total_seconds()))
        success.add_metric([name], _seconds(ok_at))
        error_at.add_metric([name], _seconds(err_at))
        failing.add_metric([name], float(err_at is not None and (ok_at is None or err_at > ok_at)))
    yield from (lag, success, failing, error_at)


def register(registry: CollectorRegistry, store: Store, clock: Clock = utcnow) -> JobMetrics:
    """Add the ledger's gauges and the job counters to ``registry``; returns the counters
    for the scheduler."""
    registry.register(LedgerCollector(store, clock))
    return JobMetrics(registry)
