"""Several units of work in one transaction, a savepoint each; and the writer that batches
waiting requests into one commit."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.domain import FailOutcome, IllegalTransition
from flowledger.receiver.api.auth import Once
from flowledger.receiver.api.deps import _nothing as auth_nothing
from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.engine.committer import GroupCommitter
from flowledger.receiver.engine.idempotency import keyed
from flowledger.services.ledger import Ledger, NotFound, Tx
from flowledger.storage import operations as records
from flowledger.storage.models import Event, Operation, table
from flowledger.storage.reads import chain
from tests.support.builders import req


def _ops(ledger: Ledger) -> dict[str, str]:
    with ledger.store.reader.connect() as conn:
        rows = conn.execute(sa.select(table(Operation).c.operation_id, table(Operation).c.state))
        return {r.operation_id: r.state for r in rows}


def test_one_failing_unit_rolls_back_only_its_own_writes_and_events(ledger: Ledger) -> None:
    def half_then_fail(tx: Tx) -> None:
        ledger.dispatch("op-bad", req("exec-9")).work(tx)  # writes, then...
        raise IllegalTransition("refused after writing")

    outcomes = ledger.run_many(
        [
            ("token:a", ledger.dispatch("op-1", req("exec-1")).work),
            ("token:b", half_then_fail),
            ("token:c", ledger.confirm("missing", "R").work),
            ("token:d", ledger.dispatch("op-2", req("exec-2")).work),
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


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the writer sends from now on (its SQL, first word first)."""
    sent: list[str] = []
    execute = Tx.execute

    def recording(self: Tx, sql: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(sql.lstrip())
        return execute(self, sql, *args, **kwargs)

    monkeypatch.setattr(Tx, "execute", recording)
    return sent


def test_a_batch_whose_refusals_came_before_any_write_runs_once_without_savepoints(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []

    def counted(op: str) -> Callable[[Tx], Any]:
        work = ledger.dispatch(op, req(f"exec-{op}")).work
        return lambda tx: runs.append(op) or work(tx)

    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [("t", counted("op-1")), ("t", ledger.confirm("missing", "R").work), ("t", counted("op-2"))]
    )
    assert [o.value.decision if o.value else None for o in outcomes] == ["go", None, "go"]
    assert isinstance(outcomes[1].error, NotFound)
    assert runs == ["op-1", "op-2"]
    assert not [s for s in sent if "SAVEPOINT" in s]
    assert _ops(ledger) == {"op-1": "dispatching", "op-2": "dispatching"}


def _counted(ledger: Ledger, runs: list[str], op: str) -> Callable[[Tx], Any]:
    """A dispatch of ``op`` that notes in ``runs`` each time it runs."""
    work = ledger.dispatch(op, req(f"exec-{op}")).work
    return lambda tx: runs.append(op) or work(tx)


def test_a_replayed_signature_is_refused_alone_before_its_unit_writes(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard's verdict is read before its unit's first write: the replay is refused with
    nothing of its unit written, and its batch runs once, without savepoints. On PostgreSQL
    the operations are read ahead, so no read of its own has waited for the guard's
    statement by then: the pipeline is synced for it."""
    until = datetime.now(UTC) + timedelta(minutes=5)
    ledger.run_many([("t", ledger.dispatch("op-0", req("exec-0")).work)], [Once("a" * 64, until)])
    runs: list[str] = []
    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [
            ("t", _counted(ledger, runs, "op-1")),
            ("t", _counted(ledger, runs, "op-2")),  # replays op-0's signature
            ("t", auth_nothing),  # a signed read, replayed
            ("t", _counted(ledger, runs, "op-3")),
        ],
        [Once("b" * 64, until), Once("a" * 64, until), Once("a" * 64, until), None],
        ["op-1", "op-2", None, "op-3"],
    )
    assert [o.value.decision if o.value else None for o in outcomes] == ["go", None, None, "go"]
    for refused in (outcomes[1].error, outcomes[2].error):
        assert isinstance(refused, ApiError) and refused.code == "replayed_signature"
    assert runs == ["op-1", "op-2", "op-3"]
    assert not [s for s in sent if "SAVEPOINT" in s]
    assert _ops(ledger) == {"op-0": "dispatching", "op-1": "dispatching", "op-3": "dispatching"}


def test_a_signed_unit_refused_before_writing_keeps_its_signature_and_runs_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    until = datetime.now(UTC) + timedelta(minutes=5)
    runs: list[str] = []
    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [("t", ledger.confirm("missing", "R").work), ("t", _counted(ledger, runs, "op-1"))],
        [Once("c" * 64, until), None],
    )
    assert isinstance(outcomes[0].error, NotFound)
    assert outcomes[1].value.decision == "go"
    assert runs == ["op-1"]
    assert not [s for s in sent if "SAVEPOINT" in s]
    again = ledger.run_many(
        [("t", ledger.dispatch("op-2", req("e")).work)], [Once("c" * 64, until)]
    )
    assert isinstance(again[0].error, ApiError)  # recorded by the refused confirm


def _keyed(ledger: Ledger, op: str, key: str, fingerprint: str) -> Callable[[Tx], Any]:
    return keyed(
        ledger.dispatch(op, req(f"exec-{op}")).work,
        lambda answer: answer.as_dict(),
        token_id=1,
        key=key,
        fingerprint=fingerprint,
        ttl=timedelta(hours=1),
    )


def test_an_idempotency_key_reused_is_refused_alone_with_nothing_written(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored key is read before anything is written: a 422 (the key used with another
    request) leaves its batch to run once, without savepoints, beside a stored answer given
    again."""
    [stored] = ledger.run_many([("t", _keyed(ledger, "op-0", "k-0", "f-0"))])
    assert stored.value.status == 200
    runs: list[str] = []
    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [
            ("t", _counted(ledger, runs, "op-1")),
            ("t", _keyed(ledger, "op-2", "k-0", "another request")),
            ("t", _keyed(ledger, "op-3", "k-0", "f-0")),  # the stored answer again
            ("t", _counted(ledger, runs, "op-4")),
        ]
    )
    assert isinstance(outcomes[1].error, ApiError) and outcomes[1].error.status == 422
    assert outcomes[2].value.replayed and outcomes[2].value.body == stored.value.body
    assert [o.value.decision for o in (outcomes[0], outcomes[3])] == ["go", "go"]
    assert runs == ["op-1", "op-4"]
    assert not [s for s in sent if "SAVEPOINT" in s]
    assert _ops(ledger) == {"op-0": "dispatching", "op-1": "dispatching", "op-4": "dispatching"}


def test_a_lost_compare_and_set_runs_the_batch_again_with_a_savepoint_per_unit(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the lost compare-and-set is only seen when the batch settles, after
    every unit's statements were sent: the batch is rolled back and run again, each unit in
    its savepoint, and the unit that lost retries on its own."""
    ledger.dispatch("op-0", req("exec-0")).run("t")
    tries: list[int] = []

    def loses_the_first_time(tx: Tx) -> int:
        tries.append(len(tries))
        version = 99 if len(tries) == 1 else 1  # the stored version is 1
        tx.expect_one(
            "UPDATE operations SET version = version + 1 WHERE operation_id = 'op-0'"
            " AND version = :v",
            {"v": version},
            records.Conflict,
        )
        return len(tries)

    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [
            ("t", ledger.dispatch("op-1", req("exec-1")).work),
            ("t", loses_the_first_time),
            ("t", ledger.dispatch("op-2", req("exec-2")).work),
        ]
    )
    assert [o.error for o in outcomes] == [None, None, None]
    assert outcomes[1].value == len(tries) >= 2
    assert [s for s in sent if s.startswith("SAVEPOINT")]
    assert _ops(ledger) == {"op-0": "dispatching", "op-1": "dispatching", "op-2": "dispatching"}
    with ledger.store.reader.connect() as conn:
        kinds = conn.execute(sa.select(table(Event).c.kind)).all()
        assert [k for (k,) in kinds] == ["dispatched"] * 3
        assert chain.verify(conn).ok


def test_a_confirms_writes_reach_postgresql_as_one_statement(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operation's compare-and-set, the attempt's end and the receipt (Tx.together)."""
    if ledger.store.dialect == "sqlite":
        pytest.skip("on SQLite a statement is a call into the process, not a send")
    import psycopg

    ledger.dispatch("op-1", req("exec-1")).run("t")
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recording(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    [outcome] = ledger.run_many([("t", ledger.confirm("op-1", "R-1").work)])
    assert outcome.value.state == "confirmed"
    writes = [q for q in sent if q.lstrip().startswith(("INSERT", "UPDATE", "WITH w"))]
    assert len(writes) == 1, writes
    assert all(w in writes[0] for w in ("UPDATE operations", "UPDATE attempts", "receipts"))
    with ledger.store.reader.connect() as conn:
        assert conn.exec_driver_sql("SELECT outcome FROM attempts").scalar_one() == "confirmed"
        assert conn.exec_driver_sql("SELECT receipt FROM receipts").scalar_one() == "R-1"


def test_a_later_unit_sees_an_earlier_units_writes_in_the_same_batch(ledger: Ledger) -> None:
    outcomes = ledger.run_many(
        [
            ("t", ledger.dispatch("op-1", req("exec-1")).work),
            ("t", ledger.dispatch("op-1", req("exec-2")).work),
            ("t", ledger.confirm("op-1", "R-1").work),
        ]
    )
    assert [o.value.decision for o in outcomes[:2]] == ["go", "hold"]
    assert outcomes[2].value.state == "confirmed"


def test_a_batch_reads_its_operations_ahead_in_one_statement_on_postgresql(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unit is handed its operation as read ahead; a later unit of the same operation
    reads it again and sees what the earlier one wrote."""
    for op in ("op-1", "op-2"):
        ledger.dispatch(op, req(f"exec-{op}")).run("t")
    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [
            ("t", ledger.confirm("op-1", "R-1").work),
            ("t", ledger.dispatch("op-3", req("exec-3")).work),  # new
            ("t", ledger.fail("op-2", FailOutcome.REJECTED, "no").work),
            ("t", ledger.confirm("op-3", "R-3").work),  # sees the dispatch before it
        ],
        reads=["op-1", "op-3", "op-2", "op-3"],
    )
    assert [o.error for o in outcomes] == [None] * 4
    assert _ops(ledger) == {"op-1": "confirmed", "op-2": "failed", "op-3": "confirmed"}
    reads = [q for q in sent if "FROM operations o LEFT JOIN holds" in q]
    # PostgreSQL: the batch's read, and op-3's again; SQLite: a read of its own each.
    assert len(reads) == (2 if ledger.store.dialect == "postgresql" else 4), reads
    assert not [q for q in sent if "SAVEPOINT" in q]


def test_an_operation_changed_after_it_was_read_ahead_loses_its_compare_and_set(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit that changes an operation another unit loads later in the batch, without
    reading it itself: the row read ahead is stale, the later unit's compare-and-set
    fails, and the batch runs again with a savepoint per unit and a read of its own."""
    ledger.dispatch("op-1", req("exec-1")).run("t")

    def bump(tx: Tx) -> None:
        tx.execute("UPDATE operations SET version = version + 1 WHERE operation_id = 'op-1'")

    sent = _statements(monkeypatch)
    outcomes = ledger.run_many(
        [("t", bump), ("t", ledger.confirm("op-1", "R-1").work)], reads=[None, "op-1"]
    )
    assert [o.error for o in outcomes] == [None, None]
    assert outcomes[1].value.state == "confirmed"
    assert _ops(ledger) == {"op-1": "confirmed"}
    if ledger.store.dialect == "postgresql":
        assert [q for q in sent if q.startswith("SAVEPOINT")]


def test_a_hold_opened_by_an_earlier_unit_is_seen_by_a_later_unit_read_ahead(
    ledger: Ledger,
) -> None:
    """The n8n error hook opens an execution_failed hold on op-1, then a confirm of op-1 in
    the same batch, handed the row read ahead before that hold existed: opening a hold
    changes no row of the operation, so no compare-and-set would notice. The confirm must
    see the hold and resolve it with its receipt."""
    ledger.dispatch("op-1", req("exec-1")).run("t")
    outcomes = ledger.run_many(
        [
            ("t", ledger.execution_failed("exec-1", "boom").work),
            ("t", ledger.confirm("op-1", "R-1", execution_id="exec-1").work),
        ],
        reads=[None, "op-1"],
    )
    assert [o.error for o in outcomes] == [None, None]
    assert [hold for _, hold in outcomes[0].value] != [None]
    assert outcomes[1].value.state == "confirmed"
    with ledger.store.reader.connect() as conn:
        left = conn.exec_driver_sql(
            "SELECT reason, resolution FROM holds WHERE operation_id = 'op-1'"
        ).all()
    assert [tuple(r) for r in left] == [("execution_failed", "confirmed_by_receipt")]


def test_a_lost_compare_and_set_in_a_pipeline_rolls_back_instead_of_committing(
    ledger: Ledger,
) -> None:
    """A unit run on its own queues its writes (PostgreSQL's pipeline) and its
    compare-and-set is checked later: a lost one must be found before the COMMIT goes out,
    so that what the unit queued before it is rolled back, not committed once per try."""
    ledger.dispatch("op-1", req("exec-1")).run("t")
    tries: list[int] = []

    def loses(tx: Tx) -> None:
        tries.append(1)
        tx.pipeline()
        tx.execute("UPDATE operations SET step = 'written' WHERE operation_id = 'op-1'")
        tx.event("dispatch_held", "op-1", {"reason": "test"})
        tx.expect_one(
            "UPDATE operations SET version = version + 1 WHERE operation_id = 'op-1'"
            " AND version = 99",
            {},
            records.Conflict,
        )

    with pytest.raises(records.Conflict):
        ledger.run("t", loses)
    assert len(tries) == ledger.retries
    with ledger.store.reader.connect() as conn:
        assert conn.exec_driver_sql("SELECT step FROM operations").scalar_one() != "written"
        kinds = conn.execute(sa.select(table(Event).c.kind)).scalars().all()
        assert kinds == ["dispatched"]
        assert chain.verify(conn).ok


def test_a_unit_that_opens_a_hold_runs_between_pipelined_units_of_one_batch(
    ledger: Ledger,
) -> None:
    """Opening a hold runs SQLAlchemy Core statements, which read each result at once: on
    PostgreSQL the unit leaves the pipeline for them, and the units around it still commit."""
    outcomes = ledger.run_many(
        [
            ("t", ledger.dispatch("op-1", req("exec-1")).work),
            ("t", ledger.confirm("op-1", "R-1").work),
            ("t", ledger.confirm("op-1", "R-2").work),  # another receipt: a possible duplicate
            ("t", ledger.dispatch("op-2", req("exec-2")).work),
        ]
    )
    assert [o.error for o in outcomes] == [None] * 4
    assert outcomes[2].value.reason == "receipt_conflict"
    assert len(outcomes[2].value.hold_ids) == 1
    assert _ops(ledger) == {"op-1": "confirmed", "op-2": "dispatching"}
    with ledger.store.reader.connect() as conn:
        kinds = conn.execute(sa.select(table(Event).c.kind).order_by(table(Event).c.seq)).all()
        assert [k for (k,) in kinds] == [
            "dispatched", "confirmed", "hold_opened", "receipt_conflict", "dispatched",
        ]  # fmt: skip
        assert chain.verify(conn).ok


def _queued_then_run(
    writer: GroupCommitter,
    units: list[Callable[[Tx], Any]],
    cancel: int | None = None,
) -> list[Any]:
    """Queue every unit before the writer starts (so they make one batch), optionally cancel
    one waiter, then collect each answer or error."""

    async def main() -> list[Any]:
        waiters = [asyncio.ensure_future(writer.commit("t", u)) for u in units]
        await asyncio.sleep(0)  # every unit is queued before the writer starts
        if cancel is not None:
            waiters[cancel].cancel()  # its client went away; the unit itself still runs
        writer.start()
        return await asyncio.gather(*waiters, return_exceptions=True)

    try:
        return asyncio.run(asyncio.wait_for(main(), timeout=60))
    finally:
        writer.close()


def test_requests_waiting_for_the_writer_share_one_commit(ledger: Ledger) -> None:
    units = [ledger.dispatch(f"op-{i}", req(f"e-{i}")).work for i in range(20)]
    commits_before = ledger.unit.commits
    answers = _queued_then_run(GroupCommitter(ledger), units)
    assert {a.decision for a in answers} == {"go"}
    assert ledger.unit.commits - commits_before == 1
    assert len(_ops(ledger)) == 20


def test_requests_handed_over_together_are_split_at_the_batch_limit(ledger: Ledger) -> None:
    """One turn of the event loop hands every request to the writer at once; a batch still
    holds at most ``max_batch`` of them, and every one is answered."""
    units = [ledger.dispatch(f"op-{i}", req(f"e-{i}")).work for i in range(20)]
    commits_before = ledger.unit.commits
    answers = _queued_then_run(GroupCommitter(ledger, max_batch=8), units)
    assert [a.decision for a in answers] == ["go"] * 20
    assert ledger.unit.commits - commits_before == 3
    assert len(_ops(ledger)) == 20


def test_the_requests_of_one_turn_reach_a_running_writer_as_one_batch(ledger: Ledger) -> None:
    """A writer already waiting is handed a turn's requests together, at the turn's end: the
    first one does not start a batch of its own while the loop still serves the others (each
    here lets the interpreter lock go before it commits, as a request's socket work does)."""
    writer = GroupCommitter(ledger)
    writer.start()
    units = [ledger.dispatch(f"op-{i}", req(f"e-{i}")).work for i in range(10)]
    commits_before = ledger.unit.commits

    async def request(unit: Callable[[Tx], Any]) -> Any:
        time.sleep(0.002)
        return await writer.commit("t", unit)

    async def main() -> list[Any]:
        return await asyncio.gather(*(request(u) for u in units))

    try:
        answers = asyncio.run(asyncio.wait_for(main(), timeout=60))
    finally:
        writer.close()
    assert [a.decision for a in answers] == ["go"] * 10
    assert ledger.unit.commits - commits_before == 1


def test_a_failed_commit_fails_every_request_of_its_batch(ledger: Ledger) -> None:
    def breaks_the_transaction(tx: Tx) -> None:
        tx.conn.invalidate()  # the connection is gone: the commit cannot happen

    units = [ledger.dispatch("op-1", req("e-1")).work, breaks_the_transaction]
    errors = _queued_then_run(GroupCommitter(ledger), units)
    assert all(isinstance(e, BaseException) for e in errors)
    assert _ops(ledger) == {}


def test_waiters_in_an_event_loop_share_a_commit_and_a_cancelled_one_spoils_nothing(
    ledger: Ledger,
) -> None:
    units = [ledger.dispatch(f"op-{i}", req(f"e-{i}")).work for i in range(10)]
    commits_before = ledger.unit.commits
    answers = _queued_then_run(GroupCommitter(ledger), units, cancel=3)
    assert isinstance(answers[3], asyncio.CancelledError)
    assert {a.decision for n, a in enumerate(answers) if n != 3} == {"go"}
    assert ledger.unit.commits - commits_before == 1
    assert len(_ops(ledger)) == 10


def test_a_unit_raising_stop_iteration_fails_alone_and_its_batch_is_answered(
    ledger: Ledger,
) -> None:
    def odd(tx: Tx) -> None:
        raise StopIteration  # an asyncio future refuses this exception as such

    units = [ledger.dispatch(f"op-{i}", req(f"e-{i}")).work for i in range(4)]
    answers = _queued_then_run(GroupCommitter(ledger), [*units[:2], odd, *units[2:]])
    assert isinstance(answers[2], RuntimeError)
    assert [a.decision for n, a in enumerate(answers) if n != 2] == ["go"] * 4


def test_two_batches_that_deadlock_are_each_run_again_whole_and_both_commit(
    ledger: Ledger,
) -> None:
    """Batch A locks op-1 then op-2, batch B op-2 then op-1. PostgreSQL aborts one to break
    the deadlock; retrying only that unit would wait again on the lock the other batch holds
    for its first unit, so the whole batch runs again."""
    if ledger.store.dialect == "sqlite":
        pytest.skip("SQLite serialises writers at BEGIN IMMEDIATE; no interleaving possible")
    for op in ("op-1", "op-2"):
        ledger.dispatch(op, req(f"e-{op}")).run("t")
    both_hold_one = threading.Barrier(2, timeout=30)
    waited: set[str] = set()

    def touch(op: str, then_wait: str | None = None) -> Callable[[Tx], str]:
        def work(tx: Tx) -> str:
            tx.execute(
                "UPDATE operations SET version = version WHERE operation_id = :id", {"id": op}
            )
            if then_wait is not None and then_wait not in waited:  # only the first time
                waited.add(then_wait)
                both_hold_one.wait()
            return op

        return work

    batches = {
        "a": [("a", touch("op-1", then_wait="a")), ("a", touch("op-2"))],
        "b": [("b", touch("op-2", then_wait="b")), ("b", touch("op-1"))],
    }
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(batches, pool.map(ledger.run_many, batches.values()), strict=True))
    assert [o.value for o in results["a"]] == ["op-1", "op-2"]
    assert [o.value for o in results["b"]] == ["op-2", "op-1"]
