"""Several units of work in one transaction, a savepoint each; and the writer that batches
waiting requests into one commit."""

from __future__ import annotations

import asyncio
from typing import Any

import sqlalchemy as sa

from ledger import chain
from ledger.domain import IllegalTransition
from ledger.models import Event, Operation, table
from ledger.receiver.committer import GroupCommitter
from ledger.services import Ledger, NotFound, Tx
from tests.factories import req


def _ops(ledger: Ledger) -> dict[str, str]:
    with ledger.store.reader.connect() as conn:
        rows = conn.execute(sa.select(table(Operation).c.operation_id, table(Operation).c.state))
        return {r.operation_id: r.state for r in rows}


def test_one_failing_unit_rolls_back_only_its_own_writes_and_events(ledger: Ledger) -> None:
    def half_then_fail(tx: Tx) -> None:
        ledger.dispatch_work("op-bad", req("exec-9"))(tx)  # writes, then...
        raise IllegalTransition("refused after writing")

    outcomes = ledger.run_many(
        [
            ("token:a", ledger.dispatch_work("op-1", req("exec-1"))),
            ("token:b", half_then_fail),
            ("token:c", ledger.confirm_work("missing", "R")),
            ("token:d", ledger.dispatch_work("op-2", req("exec-2"))),
        ]
    )
    assert [o.value.decision if o.value else None for o in outcomes] == ["go", None, None, "go"]
    assert isinstance(outcomes[1].error, IllegalTransition)
    assert isinstance(outcomes[2].error, NotFound)
    assert _ops(ledger) == {"op-1": "dispatching", "op-2": "dispatching"}
    with ledger.store.reader.connect() as conn:
        actors = conn.execute(sa.select(table(Event).c.actor).order_by(table(Event).c.seq)).all()
        assert [a for (a,) in actors] == ["token:a", "token:d"]
        assert chain.verify(conn).ok


def test_a_later_unit_sees_an_earlier_units_writes_in_the_same_batch(ledger: Ledger) -> None:
    outcomes = ledger.run_many(
        [
            ("t", ledger.dispatch_work("op-1", req("exec-1"))),
            ("t", ledger.dispatch_work("op-1", req("exec-2"))),
            ("t", ledger.confirm_work("op-1", "R-1")),
        ]
    )
    assert [o.value.decision for o in outcomes[:2]] == ["go", "hold"]
    assert outcomes[2].value.state == "confirmed"


def test_requests_waiting_for_the_writer_share_one_commit(ledger: Ledger) -> None:
    writer = GroupCommitter(ledger)
    futures = [
        writer.submit("t", ledger.dispatch_work(f"op-{i}", req(f"e-{i}"))) for i in range(20)
    ]
    commits_before = ledger._commits
    writer.start()  # everything is already queued: one batch
    try:
        answers = [f.result(timeout=60) for f in futures]
    finally:
        writer.close()
    assert {a.decision for a in answers} == {"go"}
    assert ledger._commits - commits_before == 1
    assert len(_ops(ledger)) == 20


def test_a_failed_commit_fails_every_request_of_its_batch(ledger: Ledger) -> None:
    def breaks_the_transaction(tx: Tx) -> None:
        tx.conn.invalidate()  # the connection is gone: the commit cannot happen

    writer = GroupCommitter(ledger)
    futures = [
        writer.submit("t", ledger.dispatch_work("op-1", req("e-1"))),
        writer.submit("t", breaks_the_transaction),
    ]
    writer.start()
    try:
        errors = [f.exception(timeout=60) for f in futures]
    finally:
        writer.close()
    assert all(e is not None for e in errors)
    assert _ops(ledger) == {}


def test_waiters_in_an_event_loop_share_a_commit_and_a_cancelled_one_spoils_nothing(
    ledger: Ledger,
) -> None:
    writer = GroupCommitter(ledger)

    async def main() -> list[Any]:
        waiters = [
            asyncio.ensure_future(
                writer.commit("t", ledger.dispatch_work(f"op-{i}", req(f"e-{i}")))
            )
            for i in range(10)
        ]
        await asyncio.sleep(0)  # every unit is queued before the writer starts
        waiters[3].cancel()  # its client went away; the unit itself still runs
        writer.start()
        return await asyncio.gather(*waiters, return_exceptions=True)

    commits_before = ledger._commits
    try:
        answers = asyncio.run(main())
    finally:
        writer.close()
    assert isinstance(answers[3], asyncio.CancelledError)
    assert {a.decision for n, a in enumerate(answers) if n != 3} == {"go"}
    assert ledger._commits - commits_before == 1
    assert len(_ops(ledger)) == 10


def test_a_unit_raising_stop_iteration_fails_alone_and_its_batch_is_answered(
    ledger: Ledger,
) -> None:
    def odd(tx: Tx) -> None:
        raise StopIteration  # an asyncio future refuses this exception as such

    writer = GroupCommitter(ledger)

    async def main() -> list[Any]:
        units = [ledger.dispatch_work(f"op-{i}", req(f"e-{i}")) for i in range(4)]
        waiters = [
            asyncio.ensure_future(writer.commit("t", u)) for u in [*units[:2], odd, *units[2:]]
        ]
        await asyncio.sleep(0)
        writer.start()
        return await asyncio.gather(*waiters, return_exceptions=True)

    try:
        answers = asyncio.run(asyncio.wait_for(main(), timeout=60))
    finally:
        writer.close()
    assert isinstance(answers[2], RuntimeError)
    assert [a.decision for n, a in enumerate(answers) if n != 2] == ["go"] * 4
