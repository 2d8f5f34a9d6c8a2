"""Each sweep rule fires exactly when due, never twice, and not for what was settled meanwhile."""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.config import SourceConfig, SweepConfig
from flowledger.domain import FailOutcome, Reason, causes
from flowledger.scheduled.sweep import RULES, Sweep
from flowledger.scheduled.sweep.rules import execution_failed
from flowledger.services.ledger import Ledger
from flowledger.storage import operations as records
from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Execution, Hold, Operation, Source, table
from flowledger.storage.transaction import SqlTx
from tests.support.builders import T0, FakeClock, execution_row, req
from tests.support.database import lock_waits
from tests.support.processes import wait_until

HOLDS = table(Hold)
EVENTS = table(Event)
EXECUTIONS = table(Execution)
SOURCES = table(Source)
OPS = table(Operation)
TICK = timedelta(microseconds=1)
OP = "invoice:INV-42:send"
SOURCE = SourceConfig(name="prod-n8n", kind="n8n", base_url="http://127.0.0.1:5678")


def holds(ledger: Ledger, reason: str | None = None) -> list[Any]:
    """The holds, of one reason if given, in id order."""
    stmt = sa.select(HOLDS).order_by(HOLDS.c.id)
    if reason is not None:
        stmt = stmt.where(HOLDS.c.reason == reason)
    with ledger.store.reader.connect() as conn:
        return conn.execute(stmt).all()


def opened_events(ledger: Ledger, reason: str) -> int:
    with ledger.store.reader.connect() as conn:
        data = conn.execute(
            sa.select(EVENTS.c.data).where(EVENTS.c.kind == "hold_opened")
        ).scalars()
        return sum(1 for d in data if f'"reason":"{reason}"' in d)


def sweep(ledger: Ledger, sources: tuple[SourceConfig, ...] = (SOURCE,), **cfg: Any) -> Sweep:
    return Sweep(ledger, SweepConfig(**cfg), sources, batch=2)


def at(clock: FakeClock, moment: Any) -> None:
    clock.now = moment


def fires_once_at(ledger: Ledger, clock: FakeClock, s: Sweep, due: Any, reason: str) -> Any:
    """Nothing just before ``due``; one hold at ``due``; none more on later sweeps."""
    at(clock, due - TICK)
    assert s.run().opened[reason] == 0
    assert holds(ledger, reason) == []
    at(clock, due)
    assert s.run().opened[reason] == 1
    for _ in range(2):
        clock.advance(minutes=1)
        assert s.run().opened[reason] == 0
    assert len(holds(ledger, reason)) == 1
    assert opened_events(ledger, reason) == 1
    return holds(ledger, reason)[0]


def add_execution(ledger: Ledger, **row: Any) -> None:
    with ledger.store.engine.begin() as conn:
        conn.execute(EXECUTIONS.insert().values(**execution_row(**row)))


def set_execution(ledger: Ledger, external_id: str, **values: Any) -> None:
    with ledger.store.engine.begin() as conn:
        conn.execute(
            EXECUTIONS.update().where(EXECUTIONS.c.external_id == external_id).values(**values)
        )


def test_a_sweep_reports_every_registered_rules_reason_in_order_even_when_nothing_is_due(
    ledger: Ledger,
) -> None:
    result = sweep(ledger, ()).run()
    assert list(result.opened) == list(dict.fromkeys(r.reason.value for r in RULES))
    assert result.total == 0 and set(result.seconds) == set(result.opened)


# --------------------------------------------------------------------------- unknown_outcome


def test_dispatch_past_its_deadline_gets_one_blocking_unknown_outcome_hold(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    hold = fires_once_at(
        ledger, clock, sweep(ledger), T0 + timedelta(minutes=15), "unknown_outcome"
    )
    assert hold.blocking and hold.operation_id == OP and hold.execution_id == "exec-1"
    assert ledger.dispatch(OP, req("exec-2")).run("wf").decision == "hold"


def test_the_operations_own_deadline_wins_over_the_default(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req(deadline=T0 + timedelta(minutes=3))).run("wf")
    fires_once_at(ledger, clock, sweep(ledger), T0 + timedelta(minutes=3), "unknown_outcome")


def test_an_operation_confirmed_before_the_sweep_gets_no_hold(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    clock.advance(minutes=14)
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    clock.advance(hours=30)
    assert sweep(ledger).run().total == 0
    assert holds(ledger, "unknown_outcome") == []


def test_a_late_confirm_resolves_the_sweeps_hold(ledger: Ledger, clock: FakeClock) -> None:
    ledger.dispatch(OP, req()).run("wf")
    clock.advance(minutes=20)
    sweep(ledger).run()
    answer = ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    assert answer.state == "confirmed"
    (hold,) = holds(ledger, "unknown_outcome")
    assert hold.resolution == "confirmed_by_receipt"


def test_a_workflows_fail_unknown_and_the_sweep_share_one_hold(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    clock.advance(hours=1)
    assert sweep(ledger).run().opened["unknown_outcome"] == 0
    assert len(holds(ledger, "unknown_outcome")) == 1


def test_the_sweeps_holds_have_the_cause_keys_the_workflow_rules_give(
    ledger: Ledger, clock: FakeClock
) -> None:
    """The sweep takes each hold's cause key from its query (``sql_cause_key``): the same
    text as :func:`causes.cause_key`, so a rule outside the sweep finds the hold as its own."""
    ledger.dispatch("op:late", req("exec-late")).run("wf")
    ledger.dispatch("op:failed", req("exec-9")).run("wf")
    add_execution(ledger, external_id="exec-9", status="error")
    ledger.prepare("op:idle", processing_version="v1", input={"a": 1}, has_input=True).run("wf")
    clock.advance(days=2)
    assert sweep(ledger, ()).run().total == 4  # the failed one is also late
    keys = {(h.reason, h.operation_id): h.cause_key for h in holds(ledger)}
    assert keys == {
        ("unknown_outcome", "op:late"): causes.cause_key(
            Reason.UNKNOWN_OUTCOME, operation_id="op:late", attempt=1
        ),
        ("unknown_outcome", "op:failed"): causes.cause_key(
            Reason.UNKNOWN_OUTCOME, operation_id="op:failed", attempt=1
        ),
        ("execution_failed", "op:failed"): causes.cause_key(
            Reason.EXECUTION_FAILED, operation_id="op:failed", attempt=1, execution_id="exec-9"
        ),
        ("stale_prepared", "op:idle"): causes.cause_key(
            Reason.STALE_PREPARED, operation_id="op:idle", attempt=0
        ),
    }


def test_many_due_operations_are_swept_in_batches(ledger: Ledger, clock: FakeClock) -> None:
    for n in range(5):
        ledger.dispatch(f"op-{n}", req(f"exec-{n}")).run("wf")
    clock.advance(minutes=15)
    assert sweep(ledger).run().opened["unknown_outcome"] == 5
    assert len(holds(ledger, "unknown_outcome")) == 5


# --------------------------------------------------------------------------- execution_failed


def test_an_errored_execution_holds_the_operation_it_was_dispatching(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    add_execution(ledger, external_id="exec-1", status="running")
    s = sweep(ledger)
    assert s.run().opened["execution_failed"] == 0
    set_execution(ledger, "exec-1", status="error", final=True)
    assert s.run().opened["execution_failed"] == 1
    clock.advance(minutes=1)
    assert s.run().opened["execution_failed"] == 0
    (hold,) = holds(ledger, "execution_failed")
    assert hold.blocking and hold.operation_id == OP and hold.execution_id == "exec-1"


def test_a_crashed_execution_of_another_attempt_or_source_opens_nothing(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req("exec-2", source="prod-n8n")).run("wf")
    add_execution(ledger, external_id="exec-1", status="crashed")  # not the current attempt
    add_execution(ledger, external_id="exec-2", status="crashed", source="test-n8n")
    assert sweep(ledger).run().opened["execution_failed"] == 0


@pytest.mark.parametrize(
    "stranger",
    [
        {"source": "staging-n8n", "workflow_id": "wf-other"},  # same id on another instance
        {"source": "prod-n8n", "workflow_id": "wf-other"},  # a workflow the operation is not
    ],
)
def test_a_failed_execution_of_a_stranger_with_the_same_id_opens_nothing(
    ledger: Ledger, clock: FakeClock, stranger: dict[str, str]
) -> None:
    """n8n numbers executions per instance, and the dispatch's ``source`` is optional."""
    ledger.dispatch(OP, req("11")).run("wf")  # workflow wf-1, no source
    if stranger["source"] != "prod-n8n":
        add_execution(ledger, external_id="11", status="success", workflow_id="wf-1")
    add_execution(ledger, external_id="11", status="error", **stranger)
    clock.advance(minutes=1)
    assert sweep(ledger).run().opened["execution_failed"] == 0
    assert ledger.dispatch(OP, req("12")).run("wf").reason != "execution_failed"


def test_an_execution_that_vanished_unfinished_counts_as_failed(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    add_execution(ledger, external_id="exec-1", status="running", gone_at=T0)
    assert sweep(ledger).run().opened["execution_failed"] == 1
    assert "vanished" in holds(ledger, "execution_failed")[0].detail


@pytest.mark.parametrize("candidates", [execution_failed.CANDIDATES, 3])
def test_the_failed_execution_walk_reaches_every_operation_across_batches(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, candidates: int
) -> None:
    """The rule opens two holds at a time (``batch=2``), of ids it read ``candidates`` at a
    time: failed executions whose operations are done, and one with three operations in
    flight, are all passed, and every operation in flight of a failed execution gets its
    hold, once, a batch whose commit was lost included."""
    monkeypatch.setattr(execution_failed, "CANDIDATES", candidates)
    for n in range(5):
        add_execution(ledger, external_id=f"exec-{n}", status="error")
    ledger.dispatch("op:done", req("exec-0")).run("wf")
    ledger.confirm("op:done", "R-1", execution_id="exec-0").run("wf")
    for name in ("op:a", "op:b", "op:c", "op:d"):
        ledger.dispatch(name, req("exec-3")).run("wf")
        clock.advance(seconds=1)
    ledger.dispatch("op:last", req("exec-4")).run("wf")
    s = sweep(ledger)
    batches, failed = lose_the_second_batchs_commit(
        ledger, monkeypatch, lambda t: t.hold.reason.value == "execution_failed"
    )
    assert s.run().opened["execution_failed"] == 5
    assert failed and len(batches) >= 4  # three batches at least, and one read again
    assert s.run().opened["execution_failed"] == 0
    assert sorted(h.operation_id for h in holds(ledger, "execution_failed")) == [
        "op:a", "op:b", "op:c", "op:d", "op:last",
    ]  # fmt: skip
    assert opened_events(ledger, "execution_failed") == 5


def test_an_operation_confirmed_after_the_failed_execution_rule_read_its_id_is_not_held(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule reads the ids of due operations first, without a lock, and then each batch of
    them again, locked, under the same conditions: one a confirm settled in between gets no
    hold."""
    ledger.dispatch(OP, req()).run("wf")
    ledger.dispatch("op:other", req()).run("wf")
    add_execution(ledger, external_id="exec-1", status="error")
    listed = execution_failed.Listed

    def confirmed_meanwhile(ids: list[str], size: int) -> Any:
        assert sorted(ids) == sorted([OP, "op:other"])
        assert ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf").state == "confirmed"
        return listed(ids, size)

    monkeypatch.setattr(execution_failed, "Listed", confirmed_meanwhile)
    assert sweep(ledger).run().opened["execution_failed"] == 1
    assert [h.operation_id for h in holds(ledger, "execution_failed")] == ["op:other"]


def test_an_errored_execution_after_the_confirm_opens_nothing(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    add_execution(ledger, external_id="exec-1", status="error")
    assert sweep(ledger).run().total == 0


# --------------------------------------------------------------------------- stale_prepared


def test_a_prepared_operation_left_a_day_gets_a_non_blocking_hold(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.prepare(OP, processing_version="v1", input={"a": 1}, has_input=True).run("wf")
    hold = fires_once_at(ledger, clock, sweep(ledger), T0 + timedelta(hours=24), "stale_prepared")
    assert not hold.blocking


def test_a_prepared_operation_dispatched_meanwhile_is_not_stale(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.prepare(OP, processing_version="v1", input={"a": 1}, has_input=True).run("wf")
    clock.advance(hours=23)
    ledger.dispatch(OP, req(input={"a": 1})).run("wf")
    ledger.confirm(OP, "R-1").run("wf")
    clock.advance(hours=48)
    assert sweep(ledger).run().total == 0


def test_the_stale_threshold_comes_from_the_config(ledger: Ledger, clock: FakeClock) -> None:
    ledger.prepare(OP, processing_version="v1", input={"a": 1}, has_input=True).run("wf")
    s = sweep(ledger, stale_prepared_after="2h")
    fires_once_at(ledger, clock, s, T0 + timedelta(hours=2), "stale_prepared")


# --------------------------------------------------------------------------- execution_stuck


def test_an_execution_running_past_the_limit_gets_a_hold_of_its_own(
    ledger: Ledger, clock: FakeClock
) -> None:
    add_execution(ledger, external_id="exec-9", status="running")
    hold = fires_once_at(ledger, clock, sweep(ledger), T0 + timedelta(hours=2), "execution_stuck")
    assert hold.operation_id is None and hold.execution_id == "exec-9"
    assert hold.source == "prod-n8n"


def test_an_execution_that_finished_meanwhile_is_not_stuck(
    ledger: Ledger, clock: FakeClock
) -> None:
    add_execution(ledger, external_id="exec-9", status="running")
    set_execution(ledger, "exec-9", status="success", final=True)
    clock.advance(hours=5)
    assert sweep(ledger).run().total == 0


def test_a_running_copy_the_tool_no_longer_has_is_not_stuck(
    ledger: Ledger, clock: FakeClock
) -> None:
    add_execution(ledger, external_id="exec-9", status="running", gone_at=T0)
    clock.advance(hours=5)
    assert sweep(ledger).run().opened["execution_stuck"] == 0
    assert holds(ledger, "execution_stuck") == []


def test_a_waiting_execution_is_not_stuck_however_long_it_waits(
    ledger: Ledger, clock: FakeClock
) -> None:
    add_execution(ledger, external_id="exec-9", status="waiting")
    clock.advance(days=30)
    assert sweep(ledger).run().opened["execution_stuck"] == 0
    assert holds(ledger, "execution_stuck") == []


# --------------------------------------------------------------------------- overdue


def _held(ledger: Ledger, op: str = OP) -> Any:
    ledger.dispatch(op, req()).run("wf")
    ledger.fail(op, FailOutcome.UNKNOWN, "timeout").run("wf")
    return next(h for h in holds(ledger, "unknown_outcome") if h.operation_id == op)


def test_a_hold_past_its_deadline_gets_an_overdue_hold_pointing_at_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    first = _held(ledger)
    overdue = fires_once_at(ledger, clock, sweep(ledger), first.deadline, "overdue")
    assert not overdue.blocking and overdue.operation_id == OP
    assert str(first.id) in overdue.cause_key and str(first.id) in overdue.detail
    with ledger.store.reader.connect() as conn:
        data = conn.execute(
            sa.select(EVENTS.c.data).where(EVENTS.c.hold_id == overdue.id)
        ).scalar_one()
    assert f'"refers_to":{first.id}' in data


def test_an_extended_deadline_can_fall_overdue_again_but_overdue_holds_never_do(
    ledger: Ledger, clock: FakeClock
) -> None:
    first = _held(ledger)
    s = sweep(ledger, sources=())  # so that no source_stale hold falls overdue too
    at(clock, first.deadline)
    s.run()
    new_deadline = clock.now + timedelta(hours=2)
    ledger.update_hold(
        first.id, operator="ann", note="waiting on the bank", deadline=new_deadline
    ).run()
    at(clock, new_deadline - TICK)
    assert s.run().opened["overdue"] == 0
    at(clock, new_deadline + timedelta(days=3))  # the first overdue hold is long past its own
    assert s.run().opened["overdue"] == 1
    assert len(holds(ledger, "overdue")) == 2


def test_a_hold_resolved_before_its_deadline_is_never_overdue(
    ledger: Ledger, clock: FakeClock
) -> None:
    first = _held(ledger)
    ledger.resolve(first.id, "release", note="bank says no payment", operator="ann").run()
    at(clock, first.deadline + timedelta(days=1))
    assert sweep(ledger).run().opened["overdue"] == 0


def _overdue_twice(ledger: Ledger, clock: FakeClock, first: Any) -> list[Any]:
    """``first`` falls overdue, is extended, and falls overdue again: two overdue holds."""
    s = sweep(ledger, sources=())
    at(clock, first.deadline)
    s.run()
    later = clock.now + timedelta(hours=2)
    ledger.update_hold(first.id, operator="ann", note="waiting", deadline=later).run()
    at(clock, later)
    s.run()
    about = holds(ledger, "overdue")
    assert len(about) == 2 and all(h.resolved_at is None for h in about)
    return about


def _settle_unknown(ledger: Ledger, hold_id: int, how: str) -> str:
    """Resolve the unknown_outcome hold ``hold_id`` one way; the resolution it records."""
    if how == "confirm":
        ledger.resolve(hold_id, "confirm", note="seen", operator="ann", receipt="R-1").run()
        return "confirmed_with_evidence"
    if how == "release":
        ledger.resolve(hold_id, "release", note="not at the bank", operator="ann").run()
        return "released_for_retry"
    if how == "cancel":
        ledger.resolve(hold_id, "cancel", note="not wanted", operator="ann").run()
        return "cancelled"
    if how == "late_confirm":
        ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
        return "confirmed_by_receipt"
    ledger.fail(OP, FailOutcome.REJECTED, "declined").run("wf")
    return "rejected_by_target"


@pytest.mark.parametrize("how", ["confirm", "release", "cancel", "late_confirm", "late_reject"])
def test_resolving_a_hold_closes_the_overdue_holds_about_it_naming_the_cause(
    ledger: Ledger, clock: FakeClock, how: str
) -> None:
    first = _held(ledger)
    about = _overdue_twice(ledger, clock, first)
    resolution = _settle_unknown(ledger, first.id, how)
    for h in holds(ledger, "overdue"):
        assert h.resolved_at is not None and h.resolution == "cause_resolved"
        assert h.resolution_note == f"hold {first.id} was resolved ({resolution})"
    with ledger.store.reader.connect() as conn:
        data = conn.execute(
            sa.select(EVENTS.c.data)
            .where(EVENTS.c.kind == "hold_resolved", EVENTS.c.hold_id.in_([h.id for h in about]))
            .order_by(EVENTS.c.seq)
        ).scalars()
        events = [json.loads(d) for d in data]
    assert [(e["cause_hold_id"], e["cause_resolution"]) for e in events] == [
        (first.id, resolution)
    ] * 2


def test_dismissing_a_hold_closes_the_overdue_hold_about_it_and_no_other(
    ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    ledger.dispatch(OP, req("exec-2", input={"invoice": "INV-42", "amount": 1})).run("wf")
    [mismatch] = holds(ledger, "input_mismatch")
    other = _held(ledger, "invoice:INV-43:send")
    at(clock, max(mismatch.deadline, other.deadline))
    sweep(ledger, sources=()).run()
    assert len(holds(ledger, "overdue")) == 2
    ledger.resolve(mismatch.id, "dismiss", note="known", operator="ann").run()
    closed = {h.cause_key.split(":")[1]: h.resolution for h in holds(ledger, "overdue")}
    assert closed == {str(mismatch.id): "cause_resolved", str(other.id): None}


# --------------------------------------------------------------------------- source_stale


def _synced(ledger: Ledger, when: Any) -> None:
    with ledger.store.engine.begin() as conn:
        done = conn.execute(
            SOURCES.update()
            .where(SOURCES.c.name == SOURCE.name)
            .values(last_sync_at=when, last_success_at=when)
        )
        if done.rowcount == 0:
            conn.execute(
                SOURCES.insert().values(
                    name=SOURCE.name, kind="n8n", last_sync_at=when, last_success_at=when
                )
            )


def test_a_source_not_synced_for_n_intervals_gets_one_hold(
    ledger: Ledger, clock: FakeClock
) -> None:
    _synced(ledger, T0)
    hold = fires_once_at(ledger, clock, sweep(ledger), T0 + timedelta(minutes=5), "source_stale")
    assert hold.source == SOURCE.name and hold.operation_id is None


def test_a_source_that_synced_meanwhile_is_not_stale_and_a_new_gap_is_a_new_cause(
    ledger: Ledger, clock: FakeClock
) -> None:
    _synced(ledger, T0)
    s = sweep(ledger)
    at(clock, T0 + timedelta(minutes=4))
    _synced(ledger, clock.now)
    at(clock, T0 + timedelta(minutes=8))
    assert s.run().opened["source_stale"] == 0
    at(clock, T0 + timedelta(minutes=9))
    assert s.run().opened["source_stale"] == 1


def test_a_source_never_synced_is_stale_n_intervals_after_the_sweep_first_saw_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    s = sweep(ledger)
    assert s.run().opened["source_stale"] == 0
    fires_once_at(ledger, clock, s, T0 + timedelta(minutes=5), "source_stale")


def test_first_sight_of_a_source_outlives_the_sweep_that_saw_it(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Cron's `sweep --once`, a restart and a lease takeover each make a new sweep."""
    assert sweep(ledger).run().opened["source_stale"] == 0
    for _ in range(4):
        clock.advance(minutes=1)
        assert sweep(ledger).run().opened["source_stale"] == 0
    clock.advance(minutes=1)  # five one-minute intervals since the first sweep saw it
    assert sweep(ledger).run().opened["source_stale"] == 1


# --------------------------------------------------------------------------- races


def test_a_confirm_racing_the_sweep_ends_confirmed_with_no_open_hold(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The confirm reads the operation and its holds; the sweep runs before the confirm
    writes. The confirm holds the operation (its row lock on PostgreSQL, the write lock on
    SQLite): the sweep leaves it alone, and no hold is opened about a confirmed write."""
    ledger.dispatch(OP, req()).run("wf")
    clock.advance(minutes=20)
    sweeper = threading.Thread(target=sweep(Ledger(ledger.store, clock=clock)).run)
    read = records.load_with_holds
    raced: list[bool] = []

    def read_then_race(tx: Any, operation_id: str) -> Any:
        holds_seen = read(tx, operation_id)
        if not raced:
            raced.append(True)
            sweeper.start()
            if ledger.store.dialect == "postgresql":
                sweeper.join(30)  # the whole sweep runs between the confirm's read and write
            # On SQLite the confirm holds the write lock: the sweep waits for it to commit.
        return holds_seen

    monkeypatch.setattr(SqlTx, "load_with_holds", read_then_race)
    answer = ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    sweeper.join(30)
    assert not sweeper.is_alive()
    assert answer.state == "confirmed"
    assert holds(ledger, "unknown_outcome") == []


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "read-ahead"])
def test_a_confirm_reading_while_the_sweep_opens_its_hold_waits_and_resolves_it(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    """The sweep has read the operation and written its hold, not yet committed, when the
    confirm reads it (alone, or read ahead for a receiver's batch). The confirm waits for
    the hold's commit, sees the hold, and resolves it with its receipt: nothing is left open
    about a confirmed write. The sweep never changes the operation's row, so only the
    confirm's lock on its read can make it wait (a compare-and-set would not fail)."""
    ledger.dispatch(OP, req()).run("wf")
    clock.advance(minutes=20)
    sweeper_ledger = Ledger(ledger.store, clock=clock)
    confirm = ledger.confirm(OP, "R-1", execution_id="exec-1")
    answers: list[Any] = []

    def run_confirm() -> None:
        if batched:
            (outcome,) = ledger.run_many([("wf", confirm.work)], reads=[OP])
            answers.append(outcome.value if outcome.error is None else outcome.error)
        else:
            answers.append(confirm.run("wf"))

    confirmer = threading.Thread(target=run_confirm)
    original = sweeper_ledger.open_holds

    def open_then_let_the_confirm_read(tx: Any, targets: Any, **kw: Any) -> Any:
        opened = original(tx, targets, **kw)
        if not targets or confirmer.ident is not None:
            return opened
        confirmer.start()
        if ledger.store.dialect == "postgresql":
            tx.settle()  # the hold is written, the sweep's transaction still open
            wait_until(lambda: lock_waits(ledger.store) == 1, "the confirm to wait for the sweep")
        # On SQLite the sweep holds the write lock: the confirm cannot read before its commit.
        return opened

    monkeypatch.setattr(sweeper_ledger, "open_holds", open_then_let_the_confirm_read)
    assert sweep(sweeper_ledger).run().opened["unknown_outcome"] == 1
    confirmer.join(30)
    assert not confirmer.is_alive()
    assert [a.state for a in answers] == ["confirmed"]
    assert [h.resolution for h in holds(ledger, "unknown_outcome")] == ["confirmed_by_receipt"]


def test_an_overdue_hold_is_opened_while_a_confirm_holds_the_operation_and_closed_by_it(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A confirm has read (and locked) an operation whose unknown-outcome hold is overdue;
    the sweep then reports that hold overdue. The sweep must not wait for the operation (the
    confirm, about to close the hold, would wait for the sweep's lock on the hold: a
    deadlock); the confirm then closes the hold and the overdue hold about it."""
    first = _held(ledger)
    at(clock, first.deadline)
    sweeper = threading.Thread(target=sweep(Ledger(ledger.store, clock=clock), ()).run)
    read = records.load_with_holds

    def read_then_sweep(tx: Any, operation_id: str) -> Any:
        found = read(tx, operation_id)
        if sweeper.ident is None:
            sweeper.start()
            if ledger.store.dialect == "postgresql":
                sweeper.join(30)  # the sweep runs whole between the confirm's read and write
                assert not sweeper.is_alive(), "the sweep waited for the confirm"
            # On SQLite the confirm holds the write lock: the sweep waits for it to commit.
        return found

    monkeypatch.setattr(SqlTx, "load_with_holds", read_then_sweep)
    answer = ledger.confirm(OP, "R-1", execution_id="exec-1").run("wf")
    sweeper.join(30)
    assert answer.state == "confirmed"
    if ledger.store.dialect == "postgresql":
        [overdue] = holds(ledger, "overdue")
        assert (overdue.resolved_at is not None, overdue.resolution) == (True, "cause_resolved")
    assert all(h.resolved_at is not None for h in holds(ledger, "unknown_outcome"))


def lose_the_second_batchs_commit(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, counted: Any = lambda target: True
) -> tuple[list[list[Any]], list[bool]]:
    """Record each batch of hold targets (those ``counted``) the sweep opens, and fail the
    commit of the second such batch once, as a lost race would; ``failed`` says it did. The
    batch is known by its thread: on PostgreSQL a batch reads while the one before writes."""
    from flowledger.storage import unit_of_work as unit

    original = ledger.open_holds
    batches: list[list[Any]] = []
    failed: list[bool] = []
    current = threading.local()

    def record(tx: Any, targets: Any, **kw: Any) -> Any:
        if picked := [t for t in targets if counted(t)]:
            batches.append(picked)
            current.batch = picked
        return original(tx, targets, **kw)

    def lose(name: str) -> None:
        mine = getattr(current, "batch", None)
        if name == "before_commit" and len(batches) >= 2 and mine is batches[1] and not failed:
            failed.append(True)
            raise records.Conflict()

    monkeypatch.setattr(ledger, "open_holds", record)
    monkeypatch.setattr(unit, "crashpoint", lose)
    return batches, failed


def test_a_retried_overdue_batch_is_walked_again_not_skipped(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that loses its commit runs again from where the walk stood, not past its rows."""
    for i in range(5):
        ledger.dispatch(f"op-{i}", req(f"e-{i}")).run("wf")
        ledger.fail(f"op-{i}", FailOutcome.UNKNOWN, "timeout").run("wf")
        clock.advance(seconds=1)
    clock.advance(days=1)
    s = Sweep(ledger, SweepConfig(), (), batch=2)
    _, failed = lose_the_second_batchs_commit(
        ledger, monkeypatch, lambda t: t.hold.reason.value == "overdue"
    )
    assert s.run().opened["overdue"] == 5
    assert failed and len(holds(ledger, "overdue")) == 5


def test_each_rule_walks_every_due_row_once_across_batches_and_ties(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches continue after the last committed one's last row, in (time, id) order: rows
    that share a time are neither skipped nor read twice, and a batch that lost its commit is
    read again."""
    for i in range(7):  # one dispatch time, one deadline: every row ties on time
        ledger.dispatch(f"op-{i}", req(f"e-{i}")).run("wf")
    for i in range(7, 12):  # and a deadline each
        clock.advance(seconds=1)
        ledger.dispatch(f"op-{i}", req(f"e-{i}")).run("wf")
    clock.advance(days=3)
    s = sweep(ledger, ())
    batches, failed = lose_the_second_batchs_commit(ledger, monkeypatch)
    result = s.run()
    seen = [[t.operation_id for t in batch] for batch in batches]
    assert failed
    assert result.opened["unknown_outcome"] == 12
    # The lost batch is read again, the same rows (on PostgreSQL the next batch may have read
    # its rows in between: the batches overlap); every other batch is read once.
    reads = Counter(tuple(batch) for batch in seen)
    assert sorted(reads.values()) == [1] * (len(reads) - 1) + [2]
    walked = [op for batch in reads for op in batch]
    assert sorted(walked) == sorted(f"op-{i}" for i in range(12))
    assert len(holds(ledger, "unknown_outcome")) == 12
    assert s.run().total == 0


def test_an_error_in_one_batch_ends_the_sweep_with_that_error_and_whole_batches(
    ledger: Ledger, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that fails for good (not a lost race) stops the walk: the error reaches the
    caller once the batches in flight have ended, and what committed is whole batches, each
    hold with its event; the next sweep opens the rest."""
    for i in range(9):
        ledger.dispatch(f"op-{i}", req(f"e-{i}")).run("wf")
    clock.advance(days=3)
    original = ledger.open_holds
    calls: list[int] = []

    def third_fails(tx: Any, targets: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the third batch fails")
        return original(tx, targets, **kw)

    monkeypatch.setattr(ledger, "open_holds", third_fails)
    with pytest.raises(RuntimeError, match="the third batch fails"):
        sweep(ledger, ()).run()
    monkeypatch.undo()
    kept = holds(ledger, "unknown_outcome")
    assert len(kept) % 2 == 0 and 2 <= len(kept) <= 6
    assert opened_events(ledger, "unknown_outcome") == len(kept)
    assert sweep(ledger, ()).run().opened["unknown_outcome"] == 9 - len(kept)


def test_an_operation_without_a_deadline_waits_the_ledgers_dispatch_deadline(
    store: Store, clock: FakeClock
) -> None:
    # The ledger as the CLI makes it with FLOWLEDGER_DISPATCH_DEADLINE_SECONDS=60: the sweep's
    # rule for a dispatch that has no deadline of its own (an older ledger's) waits as long.
    ledger = Ledger(store, clock=clock, dispatch_deadline=timedelta(seconds=60))
    ledger.dispatch(OP, req()).run("wf")
    with store.engine.begin() as conn:
        conn.execute(sa.update(OPS).where(OPS.c.operation_id == OP).values(deadline=None))
    fires_once_at(ledger, clock, sweep(ledger), T0 + timedelta(seconds=60), "unknown_outcome")
