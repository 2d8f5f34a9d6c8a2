"""A new hold's deadline comes from the configured hold deadlines, through the CLI's wiring."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from flowledger import domain
from flowledger.cli.common import ledger_for
from flowledger.config import FileConfig, Settings, SweepConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Hold, table
from tests.support.builders import FakeClock, req


def _deadlines(store: Store) -> dict[str, object]:
    with store.reader.connect() as conn:
        rows = conn.execute(sa.select(table(Hold).c.reason, table(Hold).c.deadline)).all()
    return {r.reason: r.deadline for r in rows}


def test_a_blocking_and_a_non_blocking_hold_get_their_own_configured_deadlines(
    store: Store, clock: FakeClock
) -> None:
    sweep = SweepConfig(blocking_hold_deadline=timedelta(minutes=10), hold_deadline="2d")
    configured = ledger_for(store, Settings(), FileConfig(sweep=sweep))
    ledger = Ledger(store, clock=clock, hold_deadlines=configured.hold_deadlines)
    ledger.dispatch("op-1", req("exec-1")).run("t")
    ledger.fail("op-1", domain.FailOutcome.UNKNOWN, "timeout").run("t")  # blocking: unknown_outcome
    ledger.dispatch("op-2", req("exec-3")).run("t")
    ledger.dispatch("op-2", req("exec-4", input={"invoice": "other"})).run("t")  # input_mismatch
    deadlines = _deadlines(store)
    assert deadlines == {
        "unknown_outcome": clock.now + timedelta(minutes=10),
        "input_mismatch": clock.now + timedelta(days=2),
    }


def _unknown_hold(ledger: Ledger) -> tuple[int, object]:
    ledger.dispatch("op-9", req("exec-9")).run("t")
    ledger.fail("op-9", domain.FailOutcome.UNKNOWN, "timeout").run("t")
    with ledger.store.reader.connect() as conn:
        row = conn.execute(sa.select(table(Hold).c.id, table(Hold).c.deadline)).one()
    return row.id, row.deadline


def test_an_extension_by_a_span_counts_from_the_current_deadline(
    store: Store, clock: FakeClock
) -> None:
    ledger = Ledger(store, clock=clock)
    hold_id, due = _unknown_hold(ledger)
    ledger.update_hold(hold_id, operator="ann", note="n", extend_by=timedelta(hours=2)).run()
    assert _deadlines(store)["unknown_outcome"] == due + timedelta(hours=2)


def test_an_extension_never_moves_a_deadline_earlier_and_says_so(
    store: Store, clock: FakeClock
) -> None:
    ledger = Ledger(store, clock=clock)
    hold_id, due = _unknown_hold(ledger)
    earlier = clock.now + timedelta(minutes=1)  # in the future, but before the deadline
    with pytest.raises(domain.IllegalTransition, match="never moves a deadline earlier"):
        ledger.update_hold(hold_id, operator="ann", note="n", deadline=earlier).run()
    with pytest.raises(domain.IllegalTransition, match="in the past"):
        ledger.update_hold(hold_id, operator="ann", note="n", deadline=clock.now).run()
    assert _deadlines(store)["unknown_outcome"] == due
