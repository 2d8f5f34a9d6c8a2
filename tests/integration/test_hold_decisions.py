"""The two decisions about an operation's next dispatch: approve it again (its approval expired
or names another version) and allow another attempt past ``max_attempts``. Each closes its
holds with one ``hold_resolved`` event, lets the next dispatch go, and replays (``verify
--deep``) to the tables as stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from flowledger import domain
from flowledger.domain import FailOutcome, IllegalTransition
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.replay import deep_verify
from tests.support.builders import FakeClock, req

OP = "invoice:INV-42:send"


def _open_hold(store: Store, reason: str) -> int:
    found = [h for h in queries.operation_detail(store, OP).holds if h["resolved_at"] is None]  # type: ignore[union-attr]
    ids = [h["id"] for h in found if h["reason"] == reason]
    assert ids, found
    return int(ids[0])


def _last_event(store: Store) -> dict[str, Any]:
    return queries.operation_detail(store, OP).events[-1]  # type: ignore[union-attr]


def _replays(store: Store) -> None:
    with chain.snapshot(store) as conn:
        found = deep_verify(conn)
    assert found.ok, found.findings


def test_an_expired_approval_approved_again_lets_the_next_dispatch_go(
    ledger: Ledger, store: Store, clock: FakeClock
) -> None:
    expired = domain.Approval("v1", clock.now - timedelta(hours=1))
    assert ledger.dispatch(OP, req(approval=expired)).run("wf").decision == "hold"
    hold_id = _open_hold(store, "approval_expired")
    until = clock.now + timedelta(days=1)

    ledger.resolve(
        hold_id, "reapprove", note="approved again by finance", operator="dave", expires_at=until
    ).run()

    event = _last_event(store)
    assert (event["kind"], event["actor"], event["hold_id"]) == (
        "hold_resolved", "operator:dave", hold_id,
    )  # fmt: skip
    assert event["data"]["resolution"] == "reapproved"
    assert event["data"]["approval"] == {"version": "v1", "expires_at": until.isoformat()}
    answer = ledger.dispatch(OP, req("exec-2", approval=expired)).run("wf")
    assert answer.decision == "go"
    _replays(store)
    clock.advance(days=2)  # past the person's approval: held again
    ledger.fail(OP, FailOutcome.REJECTED, "no").run("wf")
    assert ledger.dispatch(OP, req("exec-3", approval=expired)).run("wf").decision == "hold"


def test_an_approval_of_another_version_is_refused_and_changes_nothing(
    ledger: Ledger, store: Store
) -> None:
    ledger.dispatch(OP, req(approval=domain.Approval("v0"))).run("wf")
    hold_id = _open_hold(store, "approval_version_mismatch")
    events = len(queries.operation_detail(store, OP).events)  # type: ignore[union-attr]
    with pytest.raises(IllegalTransition, match="runs version 'v1'"):
        ledger.resolve(hold_id, "reapprove", note="n", operator="dave", version="v0").run()
    assert len(queries.operation_detail(store, OP).events) == events  # type: ignore[union-attr]
    ledger.resolve(hold_id, "reapprove", note="v1 is fine", operator="dave").run()
    assert (
        ledger.dispatch(OP, req("exec-2", approval=domain.Approval("v0"))).run("wf").decision
        == "go"
    )
    _replays(store)


def test_another_attempt_past_max_attempts_lets_one_more_dispatch_go(
    store: Store, clock: FakeClock
) -> None:
    ledger = Ledger(store, clock=clock, max_attempts=1)
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.REJECTED, "503").run("wf")
    assert ledger.dispatch(OP, req("exec-2")).run("wf").reason == "max_attempts"
    hold_id = _open_hold(store, "max_attempts")

    ledger.resolve(hold_id, "allow-attempt", note="bank is back", operator="dave").run()

    event = _last_event(store)
    assert event["data"]["resolution"] == "attempt_allowed"
    assert event["data"]["max_attempts"] == 2
    answer = ledger.dispatch(OP, req("exec-3")).run("wf")
    assert (answer.decision, answer.attempt) == ("go", 2)
    _replays(store)
    ledger.fail(OP, FailOutcome.REJECTED, "503 again").run("wf")
    assert ledger.dispatch(OP, req("exec-4")).run("wf").reason == "max_attempts"


@pytest.mark.parametrize("action", ["reapprove", "allow-attempt"])
def test_a_decision_on_the_next_dispatch_is_refused_on_another_hold(
    ledger: Ledger, store: Store, clock: FakeClock, action: str
) -> None:
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    hold_id = _open_hold(store, "unknown_outcome")
    with pytest.raises(IllegalTransition, match=f"hold {hold_id} is unknown_outcome"):
        ledger.resolve(hold_id, action, note="n", operator="dave").run()
    assert holds.hold(store, hold_id)["resolved_at"] is None  # type: ignore[index]
