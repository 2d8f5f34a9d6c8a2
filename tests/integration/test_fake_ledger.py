"""The fake of the services' port (``tests/support/fakes/ledger.py``) answers and records as the
databases do: the same calls, run on each, give the same answers, rows and events. The unit
tests that run the services on the fake (``tests/unit/test_services_fake.py``) rest on it."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from flowledger.domain import FailOutcome
from flowledger.domain.hashing import canonical_json
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Hold, Operation, Receipt, table
from tests.support.builders import FakeClock, req
from tests.support.fakes.ledger import FakeUnitOfWork

OP_COLUMNS = ("operation_id", "state", "attempt", "execution_id", "receipt", "version")
HOLD_COLUMNS = ("id", "reason", "blocking", "operation_id", "resolution", "resolved_by", "owner")


def walk(ledger: Ledger, clock: FakeClock) -> list[Any]:
    """A shift's calls: goes, holds, a replay, confirms and a conflict, an unknown outcome a
    person releases, a rejection, a failed execution, an assignment, a prepare."""
    answers: list[Any] = []

    def call(run: Any) -> None:
        answers.append(run())
        clock.advance(seconds=7)

    call(lambda: ledger.dispatch("op-1", req("e1")).run("wf"))
    call(lambda: ledger.dispatch("op-1", req("e2")).run("wf"))
    call(lambda: ledger.dispatch("op-1", req("e1")).run("wf"))
    call(lambda: ledger.confirm("op-1", "R-1", execution_id="e1").run("wf"))
    call(lambda: ledger.confirm("op-1", "R-2", execution_id="e1").run("wf"))
    call(lambda: ledger.dispatch("op-2", req("e3")).run("wf"))
    call(lambda: ledger.fail("op-2", FailOutcome.UNKNOWN, "timeout").run("wf"))
    unknown = answers[-1].hold_ids[0]
    call(lambda: ledger.resolve(unknown, "release", note="not sent", operator="ana").run())
    call(lambda: ledger.dispatch("op-2", req("e4")).run("wf"))
    call(lambda: ledger.fail("op-2", FailOutcome.REJECTED, "422 invalid").run("wf"))
    call(lambda: ledger.dispatch("op-3", req("e5")).run("wf"))
    call(lambda: ledger.execution_failed("e5", "the node crashed").run("n8n"))
    crashed = answers[-1][0][1]
    call(lambda: ledger.update_hold(crashed, operator="ana", note="mine", owner="bo").run())
    call(
        lambda: ledger.prepare(
            "op-4", processing_version="v1", input_hash="sha256:" + "a" * 64
        ).run("wf")
    )
    return answers


def test_the_fake_answers_and_records_as_the_database_does(
    ledger: Ledger, clock: FakeClock, store: Store
) -> None:
    on_database = walk(ledger, clock)
    fake_clock = FakeClock()
    unit = FakeUnitOfWork(fake_clock)
    on_fake = walk(Ledger(unit.store, unit=unit), fake_clock)

    assert on_fake == on_database
    stored = _stored(store)
    tables = unit.tables
    assert stored["operations"] == [
        tuple(tables.operations[k][c] for c in OP_COLUMNS) for k in sorted(tables.operations)
    ]
    assert stored["holds"] == [
        tuple(tables.holds[k][c] for c in HOLD_COLUMNS) for k in sorted(tables.holds)
    ]
    assert stored["receipts"] == [
        (r["operation_id"], r["attempt"], r["receipt"], r["kind"]) for r in tables.receipts
    ]
    assert stored["events"] == [
        (e.actor, e.kind, e.operation_id, e.hold_id, json.loads(canonical_json(e.data)))
        for e in unit.events
    ]


def _stored(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    ops, holds, receipts, events = (table(m) for m in (Operation, Hold, Receipt, Event))
    with store.reader.connect() as conn:
        return {
            "operations": [
                tuple(r)
                for r in conn.execute(
                    sa.select(*(ops.c[c] for c in OP_COLUMNS)).order_by(ops.c.operation_id)
                )
            ],
            "holds": [
                tuple(r)
                for r in conn.execute(
                    sa.select(*(holds.c[c] for c in HOLD_COLUMNS)).order_by(holds.c.id)
                )
            ],
            "receipts": [
                tuple(r)
                for r in conn.execute(
                    sa.select(
                        receipts.c.operation_id,
                        receipts.c.attempt,
                        receipts.c.receipt,
                        receipts.c.kind,
                    ).order_by(receipts.c.id)
                )
            ],
            "events": [
                (r.actor, r.kind, r.operation_id, r.hold_id, json.loads(r.data))
                for r in conn.execute(sa.select(events).order_by(events.c.seq))
            ],
        }
