"""The services on a real database; every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import sqlalchemy as sa

from flowledger.domain import FailOutcome, IllegalTransition
from flowledger.domain.hashing import genesis_hash
from flowledger.services.ledger import InvalidInput, Ledger, NotFound
from flowledger.storage import operations as records
from flowledger.storage.engine import Store, read_schema_version
from flowledger.storage.models import SCHEMA_VERSION
from flowledger.storage.reads import chain
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.execution_copies import EXECUTIONS
from flowledger.storage.reads.meta import identity
from flowledger.storage.sql import Row
from flowledger.storage.transaction import SqlTx
from flowledger.storage.tx import Tx
from tests.support.builders import FakeClock, req
from tests.support.database import lock_waits
from tests.support.processes import wait_until

OP = "invoice:INV-42:send"


def count(store: Store, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql(sql).scalar_one())


def test_new_ledger_has_current_schema_and_its_own_genesis_head(store: Store) -> None:
    assert read_schema_version(store.engine) == SCHEMA_VERSION
    with store.reader.connect() as conn:
        ledger_id, genesis = identity(conn)
        assert chain.head(conn) == (0, genesis) and genesis == genesis_hash(ledger_id)


def test_dispatch_records_intent_attempt_and_event_together(ledger: Ledger, store: Store) -> None:
    answer = ledger.dispatch(OP, req()).run("token:n8n")
    assert (answer.decision, answer.attempt, answer.state) == ("go", 1, "dispatching")
    detail = queries.operation_detail(store, OP)
    assert detail is not None
    assert detail.operation["state"] == "dispatching"
    assert [a["execution_id"] for a in detail.attempts] == ["exec-1"]
    assert [e["kind"] for e in detail.events] == ["dispatched"]
    assert detail.events[0]["actor"] == "token:n8n"


def test_raw_input_is_never_stored(ledger: Ledger, store: Store) -> None:
    ledger.dispatch(OP, req(input={"email": "secret-person@example.com"})).run("t")
    with store.engine.connect() as conn:
        for table in ("operations", "attempts", "events", "holds"):
            for row in conn.exec_driver_sql(f"SELECT * FROM {table}"):
                assert "secret-person" not in repr(tuple(row))


def test_replay_by_same_execution_gets_same_answer_and_no_new_attempt(
    ledger: Ledger, store: Store
) -> None:
    first = ledger.dispatch(OP, req()).run("t")
    again = ledger.dispatch(OP, req()).run("t")
    assert first.decision == again.decision == "go" and again.attempt == 1
    assert count(store, "SELECT count(*) FROM attempts") == 1


def test_other_execution_while_dispatching_is_held(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("exec-1")).run("t")
    answer = ledger.dispatch(OP, req("exec-2")).run("t")
    assert (answer.decision, answer.reason) == ("hold", "in_flight")


def test_confirmed_operation_is_skipped_with_its_receipt(ledger: Ledger) -> None:
    ledger.dispatch(OP, req()).run("t")
    ledger.confirm(OP, "CRM-991", execution_id="exec-1").run("t")
    answer = ledger.dispatch(OP, req("exec-7")).run("t")
    assert (answer.decision, answer.receipt) == ("skip", "CRM-991")


def test_confirmed_result_is_never_reused_for_another_input(ledger: Ledger, store: Store) -> None:
    ledger.dispatch(OP, req()).run("t")
    ledger.confirm(OP, "CRM-991").run("t")
    answer = ledger.dispatch(OP, req("exec-2", input={"amount": 9999})).run("t")
    assert (answer.decision, answer.reason, answer.receipt) == ("hold", "input_mismatch", "CRM-991")
    again = ledger.dispatch(OP, req("exec-3", input={"amount": 9999})).run("t")
    assert again.decision == "hold"
    assert count(store, "SELECT count(*) FROM holds WHERE reason = 'input_mismatch'") == 1


def test_version_mismatch_is_held(ledger: Ledger) -> None:
    ledger.dispatch(OP, req()).run("t")
    ledger.fail(OP, FailOutcome.REJECTED, "422").run("t")
    answer = ledger.dispatch(OP, req("exec-2", version="v2")).run("t")
    assert (answer.decision, answer.reason) == ("hold", "version_mismatch")


def test_second_receipt_that_differs_opens_one_blocking_conflict(
    ledger: Ledger, store: Store
) -> None:
    ledger.dispatch(OP, req()).run("t")
    ledger.confirm(OP, "R-1").run("t")
    assert ledger.confirm(OP, "R-1").run("t").reason is None
    conflict = ledger.confirm(OP, "R-2").run("t")
    assert conflict.reason == "receipt_conflict"
    ledger.confirm(OP, "R-2").run("t")
    assert count(store, "SELECT count(*) FROM holds WHERE reason = 'receipt_conflict'") == 1
    assert ledger.dispatch(OP, req()).run("t").decision == "hold"


def test_unknown_failure_blocks_until_released_then_next_attempt(
    ledger: Ledger, store: Store
) -> None:
    ledger.dispatch(OP, req()).run("t")
    failed = ledger.fail(OP, FailOutcome.UNKNOWN, "socket timeout").run("t")
    assert failed.state == "dispatching" and failed.hold_ids
    assert ledger.dispatch(OP, req("exec-2")).run("t").reason == "unknown_outcome"
    ledger.resolve(
        failed.hold_ids[0], "release", note="no invoice in the CRM", operator="ana"
    ).run()
    answer = ledger.dispatch(OP, req("exec-2")).run("t")
    assert (answer.decision, answer.attempt) == ("go", 2)
    detail = queries.operation_detail(store, OP)
    assert detail is not None
    assert [a["outcome"] for a in detail.attempts] == ["released", "dispatching"]
    resolved = [e for e in detail.events if e["kind"] == "hold_resolved"]
    assert resolved[0]["actor"] == "operator:ana"
    assert resolved[0]["data"]["note"] == "no invoice in the CRM"


def test_confirm_with_evidence_records_the_receipt_and_operator(
    ledger: Ledger, store: Store
) -> None:
    ledger.dispatch(OP, req()).run("t")
    hold = ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("t").hold_ids[0]
    answer = ledger.resolve(
        hold, "confirm", receipt="INV-42-PDF", note="seen in the portal", operator="ana"
    ).run()
    assert answer is not None and (answer.state, answer.receipt) == ("confirmed", "INV-42-PDF")
    detail = queries.operation_detail(store, OP)
    assert detail is not None
    assert detail.receipts[-1]["kind"] == "evidence"
    assert detail.receipts[-1]["confirmed_by"] == "operator:ana"


def test_resolving_twice_loses_the_race_and_changes_nothing(ledger: Ledger, store: Store) -> None:
    ledger.dispatch(OP, req()).run("t")
    hold = ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("t").hold_ids[0]
    ledger.resolve(hold, "cancel", note="customer withdrew", operator="ana").run()
    before = count(store, "SELECT count(*) FROM events")
    with pytest.raises(IllegalTransition, match="already resolved by operator:ana"):
        ledger.resolve(hold, "release", note="retry", operator="bo").run()
    assert count(store, "SELECT count(*) FROM events") == before


def test_assign_extend_and_note_are_events(ledger: Ledger, store: Store, clock: FakeClock) -> None:
    ledger.dispatch(OP, req()).run("t")
    hold = ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("t").hold_ids[0]
    ledger.update_hold(hold, operator="ana", note="taking it", owner="ana").run()
    later = clock.now + timedelta(hours=6)
    ledger.update_hold(hold, operator="ana", note="waiting for CRM export", deadline=later).run()
    ledger.update_hold(hold, operator="ana", note="asked finance").run()
    detail = queries.operation_detail(store, OP)
    assert detail is not None
    kinds = [e["kind"] for e in detail.events][-3:]
    assert kinds == ["hold_assigned", "hold_extended", "hold_noted"]
    assert detail.holds[0]["owner"] == "ana" and detail.holds[0]["deadline"] == later


def test_confirm_of_unknown_operation_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFound):
        ledger.confirm("nope", "R").run("t")


@pytest.mark.parametrize("bad", ["", "x" * 201, "tab\there", "nul\x00"])
def test_bad_operation_ids_are_refused_before_any_write(
    ledger: Ledger, store: Store, bad: str
) -> None:
    with pytest.raises(InvalidInput):
        ledger.dispatch(bad, req()).run("t")
    assert count(store, "SELECT count(*) FROM events") == 0


def test_input_and_hash_together_are_refused(ledger: Ledger) -> None:
    from dataclasses import replace

    with pytest.raises(InvalidInput, match="not both"):
        ledger.dispatch(OP, replace(req(), input_hash="sha256:" + "a" * 64)).run("t")


@pytest.mark.parametrize("statement", ["UPDATE events SET actor = 'mallory'", "DELETE FROM events"])
def test_events_refuse_update_and_delete(ledger: Ledger, store: Store, statement: str) -> None:
    ledger.dispatch(OP, req()).run("t")
    with pytest.raises(sa.exc.DatabaseError, match="append-only"), store.engine.begin() as conn:
        conn.exec_driver_sql(statement)
    assert count(store, "SELECT count(*) FROM events") == 1


def test_chain_verifies_after_a_busy_history(ledger: Ledger, store: Store) -> None:
    for i in range(30):
        ledger.dispatch(f"op-{i}", req(f"e-{i}")).run("t")
        if i % 3 == 0:
            ledger.confirm(f"op-{i}", f"R-{i}").run("t")
        elif i % 3 == 1:
            ledger.fail(f"op-{i}", FailOutcome.UNKNOWN, "timeout").run("t")
    with store.reader.connect() as conn:
        result = chain.verify(conn, batch=7)
    assert result.ok and result.checked == count(store, "SELECT count(*) FROM events")


def test_a_writer_that_wants_an_operation_another_has_read_waits_for_its_commit(
    ledger: Ledger, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another receiver claims the operation after our read and before our write: it waits
    for our commit (our read locked the row), then changes what we wrote, not what we read.
    Our dispatch decides once, on the row it read, and nobody's write is lost."""
    if store.dialect == "sqlite":
        pytest.skip("SQLite serialises writers at BEGIN IMMEDIATE; no interleaving possible")
    ledger.dispatch(OP, req("exec-1")).run("t")
    ledger.fail(OP, FailOutcome.REJECTED, "422").run("t")
    original = records.load_with_holds
    loads = []

    def claim() -> None:
        with store.engine.begin() as other:
            other.exec_driver_sql(
                "UPDATE operations SET execution_id = 'exec-9', version = version + 1"
            )

    other = threading.Thread(target=claim)

    def load_then_race(
        tx: Tx, operation_id: str, mark: bool = False
    ) -> tuple[Row | None, list[Any]]:
        row, holds = original(tx, operation_id, mark)
        assert row is not None
        loads.append(row.version)
        if len(loads) == 1:  # another receiver claims it after our read, before our write
            other.start()
            wait_until(lambda: lock_waits(store) == 1, "the other writer to wait for our lock")
        return row, holds

    monkeypatch.setattr(SqlTx, "load_with_holds", load_then_race)
    answer = ledger.dispatch(OP, req("exec-2")).run("t")
    other.join(30)
    assert not other.is_alive()
    assert answer.decision == "go"
    assert len(loads) == 1  # decided once: no lost race to run again
    stored = queries.operation_detail(store, OP).operation  # type: ignore[union-attr]
    assert (stored["attempt"], stored["execution_id"]) == (2, "exec-9")


def test_the_migrations_build_exactly_the_models(store: Store) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlmodel import SQLModel

    import flowledger.storage.witness_tables  # noqa: F401  (its tables on the metadata too)

    with store.engine.connect() as conn, warnings.catch_warnings():
        # SQLAlchemy cannot reflect an index on an expression; its name is checked below.
        warnings.filterwarnings("ignore", "Skipped unsupported reflection of expression-based")
        warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expression")
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata
        )
    assert diff == []
    listed = (
        "SELECT name FROM sqlite_master WHERE type = 'index'"
        if store.dialect == "sqlite"
        else "SELECT indexname FROM pg_indexes WHERE tablename = 'executions'"
    )
    with store.engine.connect() as conn:
        assert "ix_executions_started" in conn.exec_driver_sql(listed).scalars().all()


def test_migrate_on_a_current_ledger_changes_nothing(store: Store) -> None:
    from flowledger.storage import migrate

    migrate.upgrade(store)
    assert migrate.current_revision(store) == migrate.head_revision()
    assert read_schema_version(store.engine) == SCHEMA_VERSION


@pytest.mark.parametrize(
    "field", ["workflow_id", "step", "source", "input_ref", "run_index", "approval"]
)
def test_oversized_optional_fields_are_refused_before_any_write(
    ledger: Ledger, store: Store, field: str
) -> None:
    from dataclasses import replace

    from flowledger.domain import Approval

    bad = {
        "workflow_id": "w" * 201,
        "step": "s" * 201,
        "source": "x\ny",
        "input_ref": "r" * 1001,
        "run_index": -1,
        "approval": Approval("v" * 201),
    }[field]
    with pytest.raises(InvalidInput) as caught:
        ledger.dispatch(OP, replace(req(), **{field: bad})).run("t")
    assert caught.value.field in (field, "approval_version")
    assert count(store, "SELECT count(*) FROM events") == 0


def test_a_lone_surrogate_id_is_refused_before_any_write(ledger: Ledger, store: Store) -> None:
    with pytest.raises(InvalidInput):
        ledger.dispatch("op-\ud800", req()).run("t")
    assert count(store, "SELECT count(*) FROM events") == 0


def test_detail_shows_only_the_attempts_own_sources_execution(ledger: Ledger, store: Store) -> None:
    from dataclasses import replace

    from tests.support.builders import execution_row

    ledger.dispatch(OP, replace(req("42"), source="prod-n8n")).run("t")
    with store.engine.begin() as conn:
        conn.execute(
            sa.insert(EXECUTIONS),
            [execution_row("42", source="prod-n8n"), execution_row("42", source="staging-n8n")],
        )
    detail = queries.operation_detail(store, OP)
    assert detail is not None
    assert [(e["source"], e["external_id"]) for e in detail.executions] == [("prod-n8n", "42")]


def test_a_rolled_back_append_leaves_no_gap_in_the_chain(
    ledger: Ledger, store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer guesses the head from its own last append. A transaction that appended and
    then failed before its commit must not leave a guess that another process's append (to
    the same sequence number) would seem to confirm."""
    from flowledger.storage import unit_of_work as unit
    from flowledger.storage.engine import open_store

    ledger.dispatch("op-1", req("e-1")).run("t")

    def fail_before_commit(name: str) -> None:
        if name == "before_commit":
            raise RuntimeError("disk gone")

    monkeypatch.setattr(unit, "crashpoint", fail_before_commit)
    with pytest.raises(RuntimeError):
        ledger.dispatch("op-2", req("e-2")).run("t")
    monkeypatch.undo()
    elsewhere = open_store(db_url)  # another process: its own engine and its own guess
    try:
        Ledger(elsewhere).dispatch("op-3", req("e-3")).run("t")
    finally:
        elsewhere.dispose()
    ledger.dispatch("op-4", req("e-4")).run("t")
    with store.reader.connect() as conn:
        result = chain.verify(conn)
    assert result.ok and result.checked == 3
    assert count(store, "SELECT count(*) FROM operations") == 3


def test_an_unknown_failure_racing_a_confirm_leaves_no_open_hold(
    ledger: Ledger, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fail(unknown) reads the operation; a confirm elsewhere wants it before the fail
    writes. The confirm waits for the fail's commit (the fail's read locked the row), then
    sees its blocking hold and resolves it with the receipt: no blocking hold is left on a
    confirmed write."""
    if store.dialect == "sqlite":
        pytest.skip("SQLite serialises writers at BEGIN IMMEDIATE; no interleaving possible")
    ledger.dispatch(OP, req("exec-1")).run("t")
    original = records.load_with_holds
    confirmed: list[Any] = []
    other = threading.Thread(
        target=lambda: confirmed.append(
            Ledger(store).confirm(OP, "R-1", execution_id="exec-1").run("other")
        )
    )

    def read_then_confirm_elsewhere(tx: Tx, operation_id: str) -> tuple[Row | None, Any]:
        found = original(tx, operation_id)
        if other.ident is None:
            other.start()
            wait_until(lambda: lock_waits(store) == 1, "the confirm to wait for the fail")
        return found

    monkeypatch.setattr(SqlTx, "load_with_holds", read_then_confirm_elsewhere)
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("t")
    other.join(30)
    assert [a.state for a in confirmed] == ["confirmed"]
    assert count(store, "SELECT count(*) FROM holds WHERE resolved_at IS NULL") == 0
    assert count(store, "SELECT count(*) FROM holds") == 1
    assert queries.operation_detail(store, OP).operation["state"] == "confirmed"  # type: ignore[union-attr]


def test_a_rollback_after_sqlalchemy_dropped_a_lost_connection_only_returns_it(
    store: Store, clock: FakeClock
) -> None:
    """A disconnect seen through ``tx.conn`` makes SQLAlchemy invalidate the connection; the
    writer's rollback must not invalidate it again (a warning, an error under the tests)."""
    tx = Tx(store.engine, store.engine.raw_connection(), clock(), "test")
    tx.begin()
    tx.conn.invalidate()  # what SQLAlchemy does when a statement finds the server gone
    tx.rollback()
    tx.close()
    with store.engine.connect() as conn:  # the pool hands out a working connection again
        assert conn.execute(sa.text("SELECT 1")).scalar_one() == 1


def test_a_transaction_binds_each_instant_once_even_when_two_are_equal_datetimes(
    store: Store, clock: FakeClock
) -> None:
    """The binding of times is remembered within a transaction; the hour a clock repeats
    gives two datetimes that compare equal but are an hour apart, and each binds as itself."""
    first = datetime(2026, 10, 25, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    second = first.replace(fold=1)
    assert first == second and first.astimezone(UTC) != second.astimezone(UTC)
    tx = Tx(store.engine, store.engine.raw_connection(), clock(), "test")
    try:
        bound = (tx.time(first), tx.time(second), tx.time(first))
        expected = Tx(store.engine, store.engine.raw_connection(), clock(), "test")
        try:
            assert bound == (
                expected.time(first.astimezone(UTC)),
                expected.time(second.astimezone(UTC)),
                expected.time(first.astimezone(UTC)),
            )
        finally:
            expected.close()
    finally:
        tx.close()


def test_events_of_any_text_chain_exactly_however_they_are_appended(
    ledger: Ledger, store: Store, db_url: str
) -> None:
    """PostgreSQL seals events in the database (sha256 over the form the writer sends and the
    sequence number only the database knows): the verifier, which rebuilds every form from the
    stored row, must agree for any text, many events to a transaction, several transactions
    to a batch, and two writers on one database."""
    from flowledger.storage.engine import open_store

    awkward = ['quote " back\\slash', "ünï ✓ 𝄞", "tab\tline\nnul\u0000", "\u2028\u202e", ""]

    def note(i: int) -> Any:
        def work(tx: Tx) -> int:
            for j, text in enumerate(awkward):
                hold = None if j % 2 else i * 10 + j
                tx.event(f"note.{j}", None if j == 3 else f"op-ü{j}", {"t": text}, hold)
            return i

        return work

    ledger.run('actor ü "x"', note(0))
    outcomes = ledger.run_many([(f"actor-{i} ✓", note(i)) for i in range(1, 4)])
    assert [o.value for o in outcomes] == [1, 2, 3]
    elsewhere = open_store(db_url)
    try:
        Ledger(elsewhere).run("other", note(4))
    finally:
        elsewhere.dispose()
    ledger.run("again", note(5))
    with store.reader.connect() as conn:
        result = chain.verify(conn, batch=4)
    assert result.ok, result
    assert result.checked == 6 * len(awkward) == result.head_seq
