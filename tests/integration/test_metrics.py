"""The /metrics text matches the database after a scripted day."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from flowledger.config import SourceConfig, SweepConfig
from flowledger.domain import HOLD_REASONS, FailOutcome
from flowledger.reports.observability import register
from flowledger.scheduled.scheduler import Job, Scheduler
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.models import Source, table
from flowledger.storage.reads import records as queries
from tests.support.builders import T0, FakeClock, req

SOURCES = table(Source)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_match_the_database_after_a_scripted_scenario(
    ledger: Ledger, clock: FakeClock
) -> None:
    registry = CollectorRegistry()
    metrics = register(registry, ledger.store, clock)
    ledger.dispatch("a", req("e1")).run("wf")
    ledger.confirm("a", "R-1").run("wf")
    ledger.dispatch("b", req("e2")).run("wf")
    ledger.fail("b", FailOutcome.UNKNOWN, "timeout").run("wf")
    ledger.dispatch("c", req("e3")).run("wf")
    ledger.fail("c", FailOutcome.REJECTED, "400").run("wf")
    ledger.prepare("d", processing_version="v1", input={"x": 1}, has_input=True).run("wf")
    with ledger.store.engine.begin() as conn:
        conn.execute(
            SOURCES.insert(),
            [
                {
                    "name": "prod",
                    "kind": "n8n",
                    "last_success_at": T0,
                    "last_error_at": None,
                    "last_error": None,
                    "status": "ok",
                },
                {
                    "name": "test",
                    "kind": "n8n",
                    "last_success_at": T0,
                    "last_error_at": T0 + timedelta(minutes=1),
                    "last_error": "HTTP 401",
                    "status": "error",
                },
            ],
        )
    clock.advance(hours=25)
    src = SourceConfig(name="prod", kind="n8n", base_url="http://127.0.0.1:5678")
    sweep = Sweep(ledger, SweepConfig(), [src])
    sched = Scheduler([Job("sweep", timedelta(minutes=1), sweep.run)], metrics=metrics)
    sched.run_job(sched.jobs["sweep"])
    sched.run_job(Job("sweep", timedelta(minutes=1), lambda: 1 / 0))

    got = samples(registry)
    status = queries.status(ledger.store, clock.now)
    for state in ("prepared", "dispatching", "confirmed", "failed", "cancelled"):
        expected = status.by_state.get(state, 0)
        assert got[("flowledger_operations", (("state", state),))] == expected
    assert status.by_state == {"confirmed": 1, "dispatching": 1, "failed": 1, "prepared": 1}
    for reason, count in status.open_holds.items():
        assert got[("flowledger_holds_open", (("reason", reason),))] == count
    # b's unknown outcome (opened at T0, due T0+1h) is overdue, and so reported once.
    assert status.open_holds == {
        "unknown_outcome": 1,
        "stale_prepared": 1,
        "source_stale": 1,
        "overdue": 1,
    }
    assert got[("flowledger_holds_overdue", ())] == 1
    assert got[("flowledger_source_sync_lag_seconds", (("source", "prod"),))] == 25 * 3600
    assert got[("flowledger_source_failing", (("source", "test"),))] == 1
    assert got[("flowledger_source_failing", (("source", "prod"),))] == 0
    assert got[("flowledger_alerts_pending", ())] == 0
    assert got[("flowledger_job_runs_total", (("job", "sweep"),))] == 2
    assert got[("flowledger_job_failures_total", (("job", "sweep"),))] == 1

    # A person resolves b: the next scrape shows it, with nothing cached.
    with ledger.store.reader.connect() as conn:
        hold_id = conn.execute(
            sa.text("SELECT id FROM holds WHERE reason = 'unknown_outcome'")
        ).scalar_one()
    ledger.resolve(hold_id, "release", note="the bank has no such payment", operator="ann").run()
    got = samples(registry)
    # Every reason has its series, at 0 when none is open, so a rate or an alert on it sees 0.
    assert got[("flowledger_holds_open", (("reason", "unknown_outcome"),))] == 0
    assert got[("flowledger_holds_open", (("reason", "receipt_conflict"),))] == 0
    assert {labels for name, labels in got if name == "flowledger_holds_open"} == {
        (("reason", r.value),) for r in HOLD_REASONS
    }
    assert got[("flowledger_operations", (("state", "prepared"),))] == 2
    assert got[("flowledger_holds_overdue", ())] == 0
