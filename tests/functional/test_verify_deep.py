"""``flowledger verify --deep``: the tables replayed from the events, and a forged row named
by id and column (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.config import SweepConfig
from flowledger.domain import Approval, FailOutcome, NewHold, Reason
from flowledger.domain.projection import EventRow, Projection
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import from_db_time
from flowledger.storage.reads.replay import deep_verify
from flowledger.storage.tx import Tx
from tests.support.builders import FakeClock, req

runner = CliRunner()
WF = "token:n8n"


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def build_every_path(ledger: Ledger, clock: FakeClock) -> None:
    """Every transition that writes operations, attempts, receipts or holds, at least once."""
    ledger.prepare(
        "prep:1", processing_version="v1", input={"a": 1}, has_input=True, input_ref="erp:prep/1"
    ).run(WF)
    # confirmed, then a conflicting receipt, settled by a person with evidence
    ledger.dispatch("op:a", req("e-a")).run(WF)
    clock.advance(seconds=1)
    ledger.confirm("op:a", "R-a", execution_id="e-a", detail="sent").run(WF)
    ledger.confirm("op:a", "R-a2", execution_id="e-a2").run(WF)
    conflict = _open_hold_of(ledger, "op:a")
    ledger.resolve(
        conflict, "confirm", note="R-a2 is the real one", operator="ann", receipt="R-a2"
    ).run()
    # rejected, then a second attempt confirmed
    ledger.dispatch("op:b", req("e-b1")).run(WF)
    ledger.fail("op:b", FailOutcome.REJECTED, "400 bad request", execution_id="e-b1").run(WF)
    clock.advance(seconds=1)
    ledger.dispatch("op:b", req("e-b2", input_ref="https://erp/b")).run(WF)  # sets it
    ledger.confirm("op:b", "R-b").run(WF)
    # unknown, assigned, extended, noted, released; again, the execution failed, confirmed
    ledger.dispatch("op:c", req("e-c1")).run(WF)
    ledger.fail("op:c", FailOutcome.UNKNOWN, "timeout").run(WF)
    hold = _open_hold_of(ledger, "op:c")
    ledger.update_hold(hold, operator="ann", note="mine", owner="ann").run()
    ledger.update_hold(
        hold, operator="ann", note="later", deadline=clock.now + timedelta(hours=3)
    ).run()
    ledger.update_hold(hold, operator="ann", note="call them", next_action="phone the bank").run()
    ledger.resolve(hold, "release", note="bank says no", operator="ann").run()
    clock.advance(seconds=1)
    ledger.dispatch("op:c", req("e-c2")).run(WF)
    ledger.execution_failed("e-c2", "node crashed").run(WF)
    ledger.fail("op:c", FailOutcome.UNKNOWN, "timeout again").run(WF)  # a second outcome hold
    ledger.resolve(
        _open_hold_of(ledger, "op:c"), "confirm", note="seen", operator="bob", receipt="R-c"
    ).run()
    # cancelled
    ledger.dispatch("op:d", req("e-d")).run(WF)
    ledger.fail("op:d", FailOutcome.UNKNOWN, "").run(WF)
    ledger.resolve(_open_hold_of(ledger, "op:d"), "cancel", note="not needed", operator="bob").run()
    # left with its outcome unknown: its last write is the unknown outcome's
    ledger.dispatch("op:g", req("e-g")).run(WF)
    ledger.fail("op:g", FailOutcome.UNKNOWN, "socket closed").run(WF)
    # created held by an expired approval; a dispatch held in flight
    late = req("e-e", approval=Approval("v1", clock.now - timedelta(minutes=1)))
    ledger.dispatch("op:e", late).run(WF)
    ledger.dispatch("op:f", req("e-f1")).run(WF)
    ledger.dispatch("op:f", req("e-f2")).run(WF)
    # a hold about no operation, dismissed
    stale = NewHold.of(Reason.SOURCE_STALE, "source_stale:prod", "prod not synced")
    dismissed = ledger.open_hold(stale, source="prod").run("sweep")
    assert dismissed is not None
    ledger.resolve(dismissed, "dismiss", note="known outage", operator="ann").run()
    # the sweep: unknown outcomes past their deadline, then overdue holds, one settled by
    # resolving its cause
    clock.advance(hours=2)
    Sweep(ledger, SweepConfig(), actor="scheduler:test").run()
    clock.advance(hours=5)
    Sweep(ledger, SweepConfig(), actor="scheduler:test").run()
    ledger.resolve(
        _open_hold_of(ledger, "op:f", "unknown_outcome"), "release", note="no", operator="ann"
    ).run()


def _open_hold_of(ledger: Ledger, operation_id: str, reason: str | None = None) -> int:
    holds = sa.table(
        "holds",
        sa.column("id"),
        sa.column("operation_id"),
        sa.column("resolved_at"),
        sa.column("reason"),
    )
    stmt = sa.select(holds.c.id).where(
        holds.c.operation_id == operation_id, holds.c.resolved_at.is_(None)
    )
    if reason is not None:
        stmt = stmt.where(holds.c.reason == reason)
    with ledger.store.reader.connect() as conn:
        return int(conn.execute(stmt.order_by(holds.c.id)).scalars().first())


class TickingClock(FakeClock):
    """A second passes at every reading: each transaction has its own time, so a column
    replayed from the wrong event shows."""

    def __call__(self) -> datetime:
        return self.advance(seconds=1)


@pytest.fixture
def full_ledger(db_url: str) -> str:
    store, _ = init_ledger(db_url)
    clock = TickingClock()
    build_every_path(Ledger(store, clock=clock), clock)
    store.dispose()
    return db_url


def forge(db: str, sql: str) -> None:
    """Change a table behind the ledger's back (no trigger guards these)."""
    url = (
        db.replace("postgresql://", "postgresql+psycopg://", 1)
        if "://" in db
        else f"sqlite:///{db}"
    )
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(sql)
    engine.dispose()


def test_a_clean_ledger_replays_to_its_own_tables(full_ledger: str) -> None:
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 0, out
    assert "chain ok:" in out and "tables ok:" in out
    assert "against 8 operations," in out and "holds and 0 tokens" in out


def test_every_path_is_compared_not_skipped(full_ledger: str) -> None:
    """The replay rebuilt rows of every table, so a clean result means something."""
    store, _ = init_ledger(full_ledger)
    with store.reader.connect() as conn:
        found = deep_verify(conn, batch=2)  # many small ranges: the merge of ids is exercised
        counts = {
            name: conn.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar()
            for name in ("holds", "attempts", "receipts")
        }
    store.dispose()
    assert found.ok, found.findings
    assert found.operations == 8 and found.holds == counts["holds"] >= 10
    assert counts["attempts"] == 8 and counts["receipts"] == 5


def test_a_forged_operation_is_named_by_id_and_column(full_ledger: str) -> None:
    forge(
        full_ledger,
        "UPDATE operations SET state = 'confirmed', receipt = 'FORGED' WHERE operation_id = 'op:d'",
    )
    assert cli("verify", "--db", full_ledger)[0] == 0  # the chain alone cannot see it
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert "table MISMATCH: operation op:d: state is 'confirmed', the events say 'cancelled'" in out
    assert "table MISMATCH: operation op:d: receipt is 'FORGED', the events say None" in out
    assert "tables: 2 differences" in out


def test_a_forged_hold_is_named_by_id_and_column(full_ledger: str) -> None:
    hold = _first_hold(full_ledger, "op:c")
    forge(
        full_ledger,
        "UPDATE holds SET resolution = 'dismissed', resolved_by = 'operator:mallory',"
        f" deadline = '2030-01-01 00:00:00+00:00' WHERE id = {hold}",
    )
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert f"hold {hold}: resolution is 'dismissed', the events say 'released_for_retry'" in out
    assert f"hold {hold}: resolved_by is 'operator:mallory', the events say 'operator:ann'" in out
    # its deadline was extended by a person, so the events know it
    assert f"hold {hold}: deadline is 2030-01-01T00:00:00+00:00, the events say 2026-11-02T" in out


def test_rows_without_events_and_rows_removed_are_named(full_ledger: str) -> None:
    forge(
        full_ledger,
        "INSERT INTO operations (operation_id, state, input_hash, processing_version, attempt,"
        " max_attempts, version, created_at, updated_at) VALUES ('op:ghost', 'confirmed',"
        " 'sha256:x', 'v1', 1, 5, 1, '2026-11-02 09:00:00', '2026-11-02 09:00:00')",
    )
    forge(full_ledger, "DELETE FROM receipts WHERE receipt = 'R-b'")
    forge(
        full_ledger,
        "UPDATE attempts SET outcome = 'confirmed' WHERE operation_id = 'op:b' AND number = 1",
    )
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert "operation op:ghost: no event records this operation" in out
    assert "a receipt of op:b: missing; event" in out
    assert "attempt 1 of op:b: outcome is 'confirmed', the events say 'rejected'" in out


def _first_hold(db: str, operation_id: str) -> int:
    store, _ = init_ledger(db)
    with store.reader.connect() as conn:
        found = conn.execute(
            sa.text("SELECT min(id) FROM holds WHERE operation_id = :op"), {"op": operation_id}
        ).scalar()
    store.dispose()
    return int(found)


def test_a_hold_moved_to_another_operation_is_named_on_both_sides(full_ledger: str) -> None:
    hold = _first_hold(full_ledger, "op:d")
    forge(full_ledger, f"UPDATE holds SET operation_id = 'op:b' WHERE id = {hold}")
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert f"hold {hold}: operation_id is 'op:b', the events say 'op:d'" in out
    store, _ = init_ledger(full_ledger)
    with store.reader.connect() as conn:  # one operation a range: op:b and op:d apart
        found = deep_verify(conn, batch=1)
    store.dispose()
    assert {(f.what, f.column, f.stored, f.expected, f.note) for f in found.findings} == {
        (f"hold {hold}", "operation_id", "op:b", "op:d", ""),
        (f"hold {hold}", None, None, None, "no event about operation op:b opened it"),
    }


FAR = "'2030-01-01 00:00:00+00:00'"


@pytest.mark.parametrize(
    ("sql", "finding"),
    [
        (
            f"UPDATE operations SET deadline = {FAR} WHERE operation_id = 'op:g'",
            "operation op:g: deadline is 2030-01-01T00:00:00+00:00, the events say 2026-11-02T",
        ),
        (
            "UPDATE operations SET max_attempts = 99 WHERE operation_id = 'op:a'",
            "operation op:a: max_attempts is 99, the events say 5",
        ),
        (
            "UPDATE operations SET input_ref = 'https://x/forged' WHERE operation_id = 'op:b'",
            "operation op:b: input_ref is 'https://x/forged', the events say 'https://erp/b'",
        ),
        (
            "UPDATE operations SET input_ref = 'https://x/forged' WHERE operation_id = 'op:a'",
            "operation op:a: input_ref is 'https://x/forged', the events say None",
        ),
        (
            "UPDATE operations SET input_ref = NULL WHERE operation_id = 'prep:1'",
            "operation prep:1: input_ref is None, the events say 'erp:prep/1'",
        ),
        (
            f"UPDATE attempts SET deadline = {FAR} WHERE operation_id = 'op:g' AND number = 1",
            "attempt 1 of op:g: deadline is 2030-01-01T00:00:00+00:00, the events say 2026-11-02T",
        ),
    ],
    ids=["deadline", "max_attempts", "input_ref", "input_ref-none-sent", "input_ref-erased",
         "attempt-deadline"],
)  # fmt: skip
def test_a_forged_column_the_request_set_is_named(full_ledger: str, sql: str, finding: str) -> None:
    forge(full_ledger, sql)
    assert cli("verify", "--db", full_ledger)[0] == 0  # the chain alone cannot see it
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert f"table MISMATCH: {finding}" in out
    assert "tables: 1 difference (" in out


@pytest.mark.parametrize(
    ("column", "value", "finding"),
    [
        ("cause_key", "'unknown_outcome:forged'", "cause_key is 'unknown_outcome:forged', "
         "the events say 'unknown_outcome:"),
        ("deadline", FAR, "deadline is 2030-01-01T00:00:00+00:00, the events say 2026-11-02T"),
    ],
    ids=["cause_key", "deadline"],
)  # fmt: skip
def test_a_forged_cause_key_or_first_deadline_of_a_hold_is_named(
    full_ledger: str, column: str, value: str, finding: str
) -> None:
    hold = _first_hold(full_ledger, "op:g")  # never extended: its deadline is the first one
    forge(full_ledger, f"UPDATE holds SET {column} = {value} WHERE id = {hold}")
    code, out = cli("verify", "--deep", "--db", full_ledger)
    assert code == 1
    assert f"table MISMATCH: hold {hold}: {finding}" in out
    assert "tables: 1 difference (" in out


def test_every_operation_and_hold_is_compared_on_what_its_request_set(full_ledger: str) -> None:
    """The columns above are in the events of a ledger written today, on every row."""
    store, _ = init_ledger(full_ledger)
    projection = Projection()
    with store.reader.connect() as conn:
        for row in conn.execute(sa.text("SELECT * FROM events ORDER BY seq")):
            data = json.loads(row.data)
            at = from_db_time(row.at)
            assert at is not None
            projection.apply(
                EventRow(row.seq, at, row.actor, row.kind, row.operation_id, row.hold_id, data)
            )
    store.dispose()
    assert not projection.problems
    for op in projection.operations.values():
        assert {"deadline", "max_attempts", "input_ref"} <= op.values.keys(), op.key
    for attempt in projection.attempts.values():
        assert "deadline" in attempt.values, attempt.key
    for hold in projection.holds.values():
        assert {"cause_key", "deadline"} <= hold.values.keys(), hold.key


# What a writer put in these events before they recorded the columns a request sets.
_RECORDED_SINCE = {"deadline", "input_ref", "max_attempts", "cause_key"}
_RECORDING = {"prepared", "dispatched", "dispatch_held", "hold_opened"}


def test_a_chain_written_before_its_events_recorded_these_columns_still_verifies(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events without the fields leave those columns unknown, not wrong; an operation's
    deadline and input_ref are compared again once a later event records them."""
    event = Tx.event

    def older(
        tx: Tx,
        kind: str,
        operation_id: str | None,
        data: dict[str, Any],
        hold_id: int | None = None,
    ) -> None:
        if kind in _RECORDING:
            data = {k: v for k, v in data.items() if k not in _RECORDED_SINCE}
        event(tx, kind, operation_id, data, hold_id)

    store, _ = init_ledger(db_url)
    clock = TickingClock()
    ledger = Ledger(store, clock=clock)
    with monkeypatch.context() as patched:
        patched.setattr(Tx, "event", older)
        build_every_path(ledger, clock)
    hold = _first_hold(db_url, "op:g")
    forge(
        db_url,
        f"UPDATE operations SET deadline = {FAR}, max_attempts = 99, input_ref = 'x'"
        " WHERE operation_id = 'op:g'",
    )
    forge(db_url, f"UPDATE holds SET cause_key = 'forged' WHERE id = {hold}")
    code, out = cli("verify", "--deep", "--db", db_url)
    assert code == 0, out
    assert "tables ok:" in out
    # today's writer: the release clears the deadline, the dispatch records both again
    ledger.resolve(hold, "release", note="not sent", operator="ann").run()
    ledger.dispatch("op:g", req("e-g2", input_ref="https://erp/g")).run(WF)
    store.dispose()
    assert cli("verify", "--deep", "--db", db_url)[0] == 0
    forge(db_url, f"UPDATE operations SET deadline = {FAR} WHERE operation_id = 'op:g'")
    code, out = cli("verify", "--deep", "--db", db_url)
    assert code == 1
    assert "table MISMATCH: operation op:g: deadline is 2030-01-01T00:00:00+00:00" in out
    assert "tables: 1 difference (" in out
