"""A workflow's answer that arrives after the ledger stopped waiting: the sweep has opened an
``unknown_outcome`` hold (or n8n's error hook an ``execution_failed`` one) when the confirm or
the rejection comes in. Either answers the hold's question, so the hold closes with it and the
operation can go on; left open, a blocking hold on a failed operation would answer ``hold`` to
every later dispatch with no decision able to release it."""

from __future__ import annotations

import sqlalchemy as sa

from flowledger.config import SweepConfig
from flowledger.domain import FailOutcome
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.models import Event, Hold, table
from tests.support.builders import FakeClock, req

HOLDS = table(Hold)
EVENTS = table(Event)
OP = "invoice:INV-42:send"


def _holds(ledger: Ledger) -> list[tuple[str, str | None, str | None]]:
    with ledger.store.reader.connect() as conn:
        rows = conn.execute(
            sa.select(HOLDS.c.reason, HOLDS.c.resolution, HOLDS.c.resolved_by).order_by(HOLDS.c.id)
        ).all()
    return [tuple(r) for r in rows]


def test_a_late_rejection_closes_the_unknown_outcome_hold_and_a_retry_goes(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    clock.advance(minutes=16)
    assert Sweep(ledger, SweepConfig()).run().opened["unknown_outcome"] == 1

    answer = ledger.fail(OP, FailOutcome.REJECTED, "422 invalid", execution_id="exec-1").run("wf")

    assert (answer.state, answer.reason) == ("failed", None)
    assert _holds(ledger) == [("unknown_outcome", "rejected_by_target", "wf")]
    retry = ledger.dispatch(OP, req("exec-2")).run("wf")
    assert (retry.decision, retry.attempt) == ("go", 2)
    with ledger.store.reader.connect() as conn:
        resolved = conn.execute(
            sa.select(EVENTS.c.data).where(EVENTS.c.kind == "hold_resolved")
        ).scalar_one()
    assert '"resolution":"rejected_by_target"' in resolved
    assert '"note":"rejected by the target: 422 invalid"' in resolved


def test_a_late_rejection_closes_the_execution_failed_hold_too(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    opened = ledger.execution_failed("exec-1", "n8n execution exec-1 failed").run("hook")
    assert opened == [(OP, 1)]

    ledger.fail(OP, FailOutcome.REJECTED, "409 duplicate").run("wf")

    assert _holds(ledger) == [("execution_failed", "rejected_by_target", "wf")]


def test_an_unknown_outcome_reported_late_keeps_the_hold_for_a_person(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req("exec-1")).run("wf")
    clock.advance(minutes=16)
    Sweep(ledger, SweepConfig()).run()

    answer = ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")

    assert (answer.state, answer.reason) == ("dispatching", "unknown_outcome")
    assert _holds(ledger) == [("unknown_outcome", None, None)]
