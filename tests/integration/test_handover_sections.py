"""The handover report tells the next person what changed during the shift and what is about
to need someone: holds opened, extended and reassigned; the receipt each confirm recorded;
operations in flight with no hold yet; alerts not delivered; each execution's page, the stuck
one's too."""

from __future__ import annotations

from datetime import timedelta

from flowledger.config import SourceConfig, SweepConfig
from flowledger.reports import handover
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.services.outbox import target_of
from flowledger.storage.models import Execution, Source, table
from tests.integration.test_handover import _unknown
from tests.support.builders import T0, FakeClock, execution_row, req

BASE = "https://n8n.example.com"


def section(text: str, title: str) -> str:
    """The body of the report's section ``## title``."""
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def report(ledger: Ledger, clock: FakeClock) -> str:
    clock.advance(minutes=1)  # the shift ends after what it did
    return handover.build(ledger.store, handover.Shift(T0 + timedelta(hours=1), clock.now))


def test_holds_opened_during_the_shift_are_listed_open_or_resolved(
    ledger: Ledger, clock: FakeClock
) -> None:
    before = _unknown(ledger, "op:before", 0)
    clock.advance(hours=2)
    still = _unknown(ledger, "op:still", 1)
    gone = _unknown(ledger, "op:gone", 2)
    ledger.resolve(gone, "release", note="nothing there", operator="bob").run()
    opened = section(report(ledger, clock), "Opened during the shift")
    assert f"| {still} | unknown_outcome (blocking) | op:still |" in opened
    assert f"| {gone} | unknown_outcome (blocking) | op:gone |" in opened
    assert "| resolved: released_for_retry |" in opened and "| open |" in opened
    assert "op:before" not in opened and f"| {before} |" not in opened


def test_holds_extended_and_reassigned_during_the_shift_say_to_what_and_by_whom(
    ledger: Ledger, clock: FakeClock
) -> None:
    clock.advance(hours=2)
    hold = _unknown(ledger, "op:a", 1)
    ledger.update_hold(hold, operator="bob", owner="alice", note="alice has access").run()
    ledger.update_hold(hold, operator="alice", note="bank", extend_by=timedelta(hours=2)).run()
    ledger.update_hold(hold, operator="alice", note="only a note").run()
    changes = section(report(ledger, clock), "Extended and reassigned during the shift")
    rows = [line for line in changes.splitlines() if line.startswith("| 20")]
    assert len(rows) == 2  # a note alone is no change
    assert "| assigned to alice | operator:bob | alice has access |" in rows[0]
    assert "| deadline to 2026-11-02T" in rows[1] and "| operator:alice | bank |" in rows[1]


def test_a_resolution_that_confirmed_shows_the_receipt_it_recorded(
    ledger: Ledger, clock: FakeClock
) -> None:
    clock.advance(hours=2)
    hold = _unknown(ledger, "op:a", 1)
    ledger.resolve(hold, "confirm", receipt="R-77", note="seen", operator="bob").run()
    resolved = section(report(ledger, clock), "Resolved during the shift")
    assert "| confirmed_with_evidence | R-77 | operator:bob | seen |" in resolved


def test_operations_dispatching_with_no_hold_are_listed_as_about_to_be_unknown(
    ledger: Ledger, clock: FakeClock
) -> None:
    clock.advance(hours=2)
    ledger.dispatch("op:writing", req("exec-5")).run("wf")
    _unknown(ledger, "op:held", 6)  # dispatching too, but held already
    in_flight = section(report(ledger, clock), "Dispatching with no hold yet")
    assert "| op:writing | 1/5 | exec-5 |" in in_flight
    assert "(in 14m)" in in_flight and "unknown_outcome" in in_flight
    assert "op:held" not in in_flight


def test_undelivered_alerts_are_counted_and_name_their_receiver_by_its_hash(
    store, clock: FakeClock
) -> None:
    hook = "https://chat.example.com/hooks/secret-token"
    ledger = Ledger(store, clock=clock, alert_urls=[hook])
    clock.advance(hours=2)
    hold = _unknown(ledger, "op:a", 1)
    text = report(ledger, clock)
    assert "- Undelivered alerts: 1" in text
    alerts = section(text, "Undelivered alerts")
    assert f"| {hold} | unknown_outcome | {target_of(hook)} | 0 |" in alerts
    assert "secret-token" not in text


def test_executions_link_to_the_tools_page_and_a_stuck_one_is_named(
    ledger: Ledger, clock: FakeClock
) -> None:
    with ledger.store.engine.begin() as conn:
        conn.execute(
            table(Source).insert().values(name="prod-n8n", kind="n8n", status="ok", base_url=BASE)
        )
        conn.execute(
            table(Execution).insert(),
            [
                execution_row("exec-1", "error", workflow_id="wf-1"),
                execution_row("exec-9", "running", workflow_id="wf-9"),
            ],
        )
    clock.advance(hours=2)
    _unknown(ledger, "op:a", 1)
    source = SourceConfig(name="prod-n8n", kind="n8n", base_url=BASE)
    Sweep(ledger, SweepConfig(), (source,)).run()  # exec-9 has run two hours: stuck
    held = section(report(ledger, clock), "Open holds by owner")
    assert f"[exec-1](<{BASE}/workflow/wf-1/executions/exec-1>) (error)" in held
    stuck = next(line for line in held.splitlines() if "execution_stuck" in line)
    assert f"[exec-9](<{BASE}/workflow/wf-9/executions/exec-9>) (running)" in stuck
