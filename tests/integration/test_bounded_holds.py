"""At most one open hold per reason about an operation: a further conflicting receipt, input,
version or approval adds its evidence to the hold already open (its detail, and an event
naming the hold), instead of opening a hold and an alert of its own. Any write token could
otherwise flood the queue, one hold and one alert per distinct value sent."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.domain import Approval
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads.replay import deep_verify
from tests.support.builders import FakeClock, req

OP = "invoice:INV-42:send"
SENT = 4  # conflicting values sent after the first


def _rows(store: Store, sql: str) -> list[Any]:
    with store.reader.connect() as conn:
        return list(conn.execute(sa.text(sql)).all())


def _receipts(ledger: Ledger, n: int) -> None:
    ledger.confirm(OP, f"R-{n + 2}", execution_id="exec-1").run("workflow")


def _inputs(ledger: Ledger, n: int) -> None:
    ledger.dispatch(OP, req(f"exec-{n + 2}", input={"amount": n})).run("workflow")


def _versions(ledger: Ledger, n: int) -> None:
    ledger.dispatch(OP, req(f"exec-{n + 2}", version=f"v{n + 2}")).run("workflow")


def _approvals(ledger: Ledger, n: int) -> None:
    approval = Approval(f"v{n + 9}", None)
    ledger.dispatch(OP, req(f"exec-{n + 2}", approval=approval)).run("workflow")


# reason -> (what the operation is first, each conflicting call)
CONFLICTS: dict[str, tuple[str, Callable[[Ledger, int], None]]] = {
    "receipt_conflict": ("confirmed", _receipts),
    "input_mismatch": ("confirmed", _inputs),
    "version_mismatch": ("confirmed", _versions),
    "approval_version_mismatch": ("released", _approvals),
}


@pytest.mark.parametrize("reason", list(CONFLICTS))
def test_conflicts_on_one_operation_open_one_hold_and_one_alert_per_reason(
    store: Store, clock: FakeClock, reason: str
) -> None:
    ledger = Ledger(store, clock=clock, alert_urls=["https://chat.example/hook"])
    first, conflict = CONFLICTS[reason]
    ledger.dispatch(OP, req("exec-1")).run("workflow")
    if first == "confirmed":
        ledger.confirm(OP, "R-1", execution_id="exec-1").run("workflow")
    else:
        ledger.release(OP, execution_id="exec-1", run_index=0).run("workflow")
    for n in range(SENT):
        clock.advance(seconds=10)  # past the twin window: each execution alone
        conflict(ledger, n)
    holds = _rows(store, f"SELECT id, detail, version FROM holds WHERE reason = '{reason}'")
    assert len(holds) == 1, holds
    assert len(_rows(store, "SELECT id FROM outbox")) == 1
    evidence = _rows(
        store, "SELECT hold_id, data FROM events WHERE kind = 'hold_evidence' ORDER BY seq"
    )
    assert [e.hold_id for e in evidence] == [holds[0].id] * (SENT - 1)
    # Every value sent after the first is in the hold's detail too.
    assert holds[0].detail.count("; also ") == SENT - 1
    assert holds[0].version == SENT - 1
    with store.reader.connect() as conn:
        found = deep_verify(conn)
    assert found.ok, found.findings


def test_once_the_hold_is_resolved_a_further_conflict_opens_a_new_one(
    store: Store, clock: FakeClock
) -> None:
    ledger = Ledger(store, clock=clock)
    ledger.dispatch(OP, req("exec-1")).run("workflow")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("workflow")
    ledger.confirm(OP, "R-2", execution_id="exec-1").run("workflow")
    (hold,) = _rows(store, "SELECT id FROM holds")
    ledger.resolve(hold.id, "confirm", note="R-1 in the log", operator="ann", receipt="R-1").run()
    ledger.confirm(OP, "R-3", execution_id="exec-1").run("workflow")
    assert len(_rows(store, "SELECT id FROM holds WHERE resolved_at IS NULL")) == 1
    assert not _rows(store, "SELECT seq FROM events WHERE kind = 'hold_evidence'")


def test_the_same_conflict_sent_again_adds_nothing(store: Store, clock: FakeClock) -> None:
    ledger = Ledger(store, clock=clock)
    ledger.dispatch(OP, req("exec-1")).run("workflow")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("workflow")
    for _ in range(3):
        ledger.confirm(OP, "R-2", execution_id="exec-1").run("workflow")
    assert len(_rows(store, "SELECT id FROM holds")) == 1
    assert not _rows(store, "SELECT seq FROM events WHERE kind = 'hold_evidence'")


def test_conflicts_racing_from_threads_and_batches_open_one_hold(
    store: Store, clock: FakeClock
) -> None:
    ledger = Ledger(store, clock=clock, alert_urls=["https://chat.example/hook"])
    ledger.dispatch(OP, req("exec-1")).run("workflow")
    ledger.confirm(OP, "R-1", execution_id="exec-1").run("workflow")

    def client(n: int) -> None:
        batch = [ledger.confirm(OP, f"R-{n}-{k}", execution_id="exec-1") for k in range(3)]
        ledger.run_many([("workflow", call.work) for call in batch])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(client, range(4)))
    assert len(_rows(store, "SELECT id FROM holds")) == 1
    assert len(_rows(store, "SELECT id FROM outbox")) == 1
    assert len(_rows(store, "SELECT seq FROM events WHERE kind = 'hold_evidence'")) == 11
    with store.reader.connect() as conn:
        assert deep_verify(conn).ok
