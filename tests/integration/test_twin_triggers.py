"""Twin triggers on SQLite and PostgreSQL: one operation dispatched by two executions of one
workflow within the window is recorded once, whatever each was answered, on one
``duplicate_trigger`` hold per workflow and day whose count grows; and it shows in ``status``,
the metrics, ``show`` and the handover."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry, generate_latest

from flowledger.domain import FailOutcome
from flowledger.reports import handover
from flowledger.reports.observability import register
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import chain, records
from flowledger.storage.reads.replay import deep_verify
from tests.integration.racer import two_racers
from tests.integration.twin_racer import twins_race
from tests.support.builders import T0, FakeClock, req
from tests.support.cli import cli

OP = "invoice:INV-42:send"
WINDOW = timedelta(seconds=5)


def _rows(store: Store, sql: str) -> list[Any]:
    with store.reader.connect() as conn:
        return list(conn.execute(sa.text(sql)).mappings().all())


def _twin_holds(store: Store) -> list[Any]:
    return _rows(
        store,
        "SELECT id, cause_key, blocking, operation_id, execution_id, source, detail,"
        " occurrences, resolved_at FROM holds WHERE reason = 'duplicate_trigger' ORDER BY id",
    )


def _observations(store: Store) -> list[dict[str, Any]]:
    found = []
    for ev in records.iter_events(store):
        if ev["kind"] == "twin_trigger":
            found.append({**ev["data"], "operation_id": ev["operation_id"], "hold": ev["hold_id"]})
    return found


def _clean(store: Store) -> None:
    with store.reader.connect() as conn:
        assert chain.verify(conn).ok
        found = deep_verify(conn)
        assert found.ok, found


def _wrote(ledger: Ledger, execution: str, **kw: Any) -> str | None:
    return ledger.dispatch(OP, req(execution, source="prod-n8n", **kw)).run("workflow").decision


@pytest.fixture
def ledger(store: Store, clock: FakeClock) -> Ledger:
    return Ledger(store, clock=clock, twin_window=WINDOW, alert_urls=["https://chat.example/x"])


def test_a_second_execution_held_in_flight_is_one_twin_and_one_hold(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    assert _wrote(ledger, "311") == "go"
    clock.advance(seconds=0.042)

    answer = ledger.dispatch(OP, req("312", source="prod-n8n")).run("workflow")

    assert (answer.decision, answer.reason) == ("hold", "in_flight")  # as before
    (hold,) = _twin_holds(store)
    assert hold["cause_key"] == "duplicate_trigger:prod-n8n:wf-1:2026-11-02"
    assert not hold["blocking"] and hold["operation_id"] is None
    assert (hold["execution_id"], hold["source"], hold["occurrences"]) == ("312", "prod-n8n", 1)
    assert hold["detail"] == (
        "the workflow tool started workflow wf-1 twice for one call, 42 ms apart: "
        f"executions 311 and 312 both dispatched {OP}"
    )
    (seen,) = _observations(store)
    assert seen == {
        "workflow_id": "wf-1",
        "source": "prod-n8n",
        "executions": ["311", "312"],
        "first_dispatch": "311",
        "gap_ms": 42,
        "opened_hold": True,
        "operation_id": OP,
        "hold": hold["id"],
    }
    # The hold blocks nothing: the first execution confirms, and a later run skips.
    ledger.confirm(OP, "R-1", execution_id="311").run("workflow")
    clock.advance(minutes=5)
    assert _wrote(ledger, "400") == "skip"
    assert len(_twin_holds(store)) == 1 and len(_observations(store)) == 1
    alerts = _rows(store, "SELECT kind, payload FROM outbox")
    assert sum("duplicate_trigger" in a["payload"] for a in alerts) == 1
    _clean(store)


@pytest.mark.parametrize("first_outcome", ["confirmed", "rejected", "released"])
def test_a_twin_is_seen_whatever_the_first_execution_did_meanwhile(
    store: Store, ledger: Ledger, clock: FakeClock, first_outcome: str
) -> None:
    assert _wrote(ledger, "311") == "go"
    if first_outcome == "confirmed":
        ledger.confirm(OP, "R-1", execution_id="311").run("workflow")
    elif first_outcome == "rejected":
        ledger.fail(OP, FailOutcome.REJECTED, "422", execution_id="311").run("workflow")
    else:
        ledger.release(OP, execution_id="311", run_index=0).run("workflow")
    clock.advance(seconds=0.1)

    decision = _wrote(ledger, "312")

    assert decision == {"confirmed": "skip", "rejected": "go", "released": "go"}[first_outcome]
    (seen,) = _observations(store)
    assert (seen["executions"], seen["gap_ms"]) == (["311", "312"], 100)
    _clean(store)


def test_the_same_pair_sending_again_is_recorded_once(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    _wrote(ledger, "311")
    clock.advance(seconds=0.05)
    _wrote(ledger, "312")
    # n8n's Retry On Fail sends each dispatch again, same execution and run.
    for execution in ("312", "311", "312"):
        clock.advance(seconds=0.5)
        _wrote(ledger, execution)

    assert len(_observations(store)) == 1
    assert _twin_holds(store)[0]["occurrences"] == 1
    _clean(store)


def test_further_twins_that_day_count_on_the_one_hold_and_a_new_day_opens_another(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    for n, op in enumerate(("a", "b", "c")):
        ledger.dispatch(op, req(f"{n}0", source="prod-n8n")).run("workflow")
        clock.advance(seconds=1)
        ledger.dispatch(op, req(f"{n}1", source="prod-n8n")).run("workflow")
        clock.advance(minutes=10)
    # A third execution of the same operation is a twin of the second.
    ledger.dispatch("c", req("22", source="prod-n8n")).run("workflow")

    (hold,) = _twin_holds(store)
    assert hold["occurrences"] == 3  # c's third came 10 minutes later: no twin
    assert "also 1000 ms apart: executions 10 and 11 both dispatched b" in hold["detail"]
    assert "executions 20 and 21 both dispatched c" in hold["detail"]

    clock.advance(days=1)
    ledger.dispatch("d", req("30", source="prod-n8n")).run("workflow")
    ledger.dispatch("d", req("31", source="prod-n8n")).run("workflow")
    # Another workflow, and another source, have holds of their own.
    ledger.dispatch("e", req("40", source="prod-n8n", workflow_id="wf-2")).run("workflow")
    ledger.dispatch("e", req("41", source="prod-n8n", workflow_id="wf-2")).run("workflow")
    ledger.dispatch("f", req("50", source="staging")).run("workflow")
    ledger.dispatch("f", req("51", source="staging")).run("workflow")

    keys = [h["cause_key"] for h in _twin_holds(store)]
    assert keys == [
        "duplicate_trigger:prod-n8n:wf-1:2026-11-02",
        "duplicate_trigger:prod-n8n:wf-1:2026-11-03",
        "duplicate_trigger:prod-n8n:wf-2:2026-11-03",
        "duplicate_trigger:staging:wf-1:2026-11-03",
    ]
    assert len(_observations(store)) == 6
    _clean(store)


def test_a_twin_after_the_hold_was_dismissed_is_counted_and_opens_nothing(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    ledger.dispatch("a", req("1", source="prod-n8n")).run("workflow")
    ledger.dispatch("a", req("2", source="prod-n8n")).run("workflow")
    (hold,) = _twin_holds(store)
    ledger.resolve(hold["id"], "dismiss", note="n8n webhook retried", operator="ann").run()
    clock.advance(hours=2)

    ledger.dispatch("b", req("3", source="prod-n8n")).run("workflow")
    ledger.dispatch("b", req("4", source="prod-n8n")).run("workflow")

    (after,) = _twin_holds(store)
    assert after["resolved_at"] is not None and after["occurrences"] == 2
    assert after["detail"] == hold["detail"]  # a decided hold's words stay
    assert [o["hold"] for o in _observations(store)] == [hold["id"], hold["id"]]
    _clean(store)


@pytest.mark.parametrize(
    ("second", "after"),
    [
        (req("312", workflow_id="wf-2"), timedelta(seconds=0.05)),  # another workflow
        (req("312", workflow_id=None), timedelta(seconds=0.05)),  # names none
        (req("312"), timedelta(seconds=5.001)),  # outside the window
        (req("312"), timedelta(days=400)),
        (req("311", run_index=1), timedelta(seconds=0.05)),  # the same execution, next run
        (req("312", input={"invoice": "INV-42", "amount": 9}), timedelta(seconds=0.05)),
        (req("312", version="v2"), timedelta(seconds=0.05)),  # another call: held as such
    ],
)
def test_dispatches_that_are_not_twins_record_nothing(
    store: Store, ledger: Ledger, clock: FakeClock, second: Any, after: timedelta
) -> None:
    ledger.dispatch(OP, req("311")).run("workflow")
    clock.advance(seconds=after.total_seconds())

    ledger.dispatch(OP, second).run("workflow")

    assert _twin_holds(store) == [] and _observations(store) == []


def test_a_dispatch_of_another_input_leaves_the_mark_to_the_last_matching_one(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    _wrote(ledger, "311")
    clock.advance(seconds=1)
    _wrote(ledger, "312", input={"changed": True})  # input_mismatch, not a twin
    clock.advance(seconds=1)

    _wrote(ledger, "313")

    (seen,) = _observations(store)
    assert (seen["executions"], seen["gap_ms"]) == (["311", "313"], 2000)


def test_a_receiver_whose_clock_runs_behind_still_sees_the_twin(store: Store) -> None:
    ahead, behind = FakeClock(T0), FakeClock(T0 - timedelta(seconds=2))
    Ledger(store, clock=ahead).dispatch(OP, req("311")).run("workflow")

    Ledger(store, clock=behind).dispatch(OP, req("312")).run("workflow")

    (seen,) = _observations(store)
    assert seen["gap_ms"] == 2000


def test_a_window_of_zero_turns_it_off(store: Store, clock: FakeClock) -> None:
    ledger = Ledger(store, clock=clock, twin_window=timedelta(0))
    ledger.dispatch(OP, req("311")).run("workflow")
    ledger.dispatch(OP, req("312")).run("workflow")

    assert _twin_holds(store) == []


def test_twins_in_one_group_commit_are_seen(store: Store, ledger: Ledger) -> None:
    calls = [ledger.dispatch(OP, req(e, source="prod-n8n")) for e in ("311", "312", "311")]

    outcomes = ledger.run_many([("workflow", c.work) for c in calls])

    assert [o.value.decision for o in outcomes] == ["go", "hold", "go"]
    assert [o["executions"] for o in _observations(store)] == [["311", "312"]]
    _clean(store)


def _twins_42_ms_apart(ledger: Ledger, clock: FakeClock) -> None:
    _wrote(ledger, "311")
    clock.advance(seconds=0.042)
    _wrote(ledger, "312")


def test_status_metrics_show_and_handover_say_it(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    _twins_42_ms_apart(ledger, clock)
    ledger.dispatch("b", req("5", source="prod-n8n")).run("workflow")
    ledger.dispatch("b", req("6", source="prod-n8n")).run("workflow")

    st = records.status(store, clock.now)
    assert st.twin_triggers == {"prod-n8n": 2}
    assert st.open_holds["duplicate_trigger"] == 1

    registry = CollectorRegistry()
    register(registry, store, clock=clock)
    scraped = generate_latest(registry).decode()
    assert 'flowledger_duplicate_triggers_total{source="prod-n8n"} 2.0' in scraped

    detail = records.operation_detail(store, OP)
    assert detail is not None
    assert [e["kind"] for e in detail.events].count("twin_trigger") == 1

    text = handover.build(store, handover.Shift(T0 - timedelta(hours=1), clock.now))
    assert "## Twin triggers" in text
    assert "2 twins" in text
    assert "started workflow wf-1 twice for one call, 42 ms apart: executions 311 and 312" in text


def test_two_processes_recording_twins_at_once_share_one_hold(db_url: str) -> None:
    """Each round both processes dispatch two operations in opposite orders, from executions
    of their own: every operation gets one go and one twin, recorded by whichever process
    came second, so both processes open or count the day's hold at the same moments."""
    rounds = 30
    init_ledger(db_url)[0].dispose()
    outcomes = two_racers(twins_race, db_url, rounds)

    for i in range(rounds):
        for op in (f"a-{i}", f"b-{i}"):
            decisions = sorted(outcomes[name][op] for name in ("left", "right"))
            assert decisions == ["go", "hold"], (op, decisions)
    store = open_store(db_url)
    try:
        (hold,) = _twin_holds(store)
        assert hold["occurrences"] == 2 * rounds
        seen = _observations(store)
        assert len(seen) == 2 * rounds
        assert {o["operation_id"] for o in seen} == {
            f"{x}-{i}" for x in "ab" for i in range(rounds)
        }
        opened = [ev for ev in records.iter_events(store) if ev["kind"] == "hold_opened"]
        assert len(opened) == 1
        _clean(store)
    finally:
        store.dispose()


def test_the_cli_says_it_in_status_show_and_the_holds(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    _twins_42_ms_apart(ledger, clock)
    db = ["--db", str(store.url) if store.url.drivername != "sqlite" else str(store.url.database)]

    code, out, _ = cli("status", *db)
    assert code == 0 and "twin triggers counted: 1" in out
    code, out, _ = cli("show", OP, *db)
    assert code == 0 and "twin triggers" in out
    assert "twice for one call, 42 ms apart: executions 311 and 312" in out
    code, out, _ = cli("holds", "--reason", "duplicate_trigger", "--json", *db)
    (listed,) = json.loads(out)
    assert (listed["occurrences"], listed["blocking"]) == (1, False)


def test_after_a_person_releases_the_hold_the_next_execution_is_no_twin(
    store: Store, ledger: Ledger, clock: FakeClock
) -> None:
    """The retry a person asked for (or started in n8n) comes within the window of the
    execution that failed: a new round, not the workflow tool firing twice."""
    assert _wrote(ledger, "311") == "go"
    ledger.fail(OP, FailOutcome.UNKNOWN, "503", execution_id="311").run("workflow")
    (held,) = _rows(store, "SELECT id FROM holds WHERE resolved_at IS NULL")
    ledger.resolve(held["id"], "release", note="not written: checked", operator="ana").run()
    clock.advance(seconds=0.5)

    assert _wrote(ledger, "312") == "go"

    assert _observations(store) == [] and _twin_holds(store) == []
    _clean(store)
