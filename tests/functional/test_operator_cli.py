"""``flowledger demo`` and ``flowledger handover`` as a person runs them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain import BLOCKING_REASONS, Reason
from flowledger.programs import demo
from flowledger.storage.engine import LedgerError, open_store
from flowledger.storage.reads import chain
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records as queries

runner = CliRunner()
HOLD_REASONS = {r.value for r in Reason} - {"in_flight", "cancelled"}


def test_demo_builds_a_marked_ledger_with_every_kind_of_record(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    result = runner.invoke(app, ["demo", "--db", db])
    assert result.exit_code == 0, result.output
    assert "made-up data" in result.output
    store = open_store(db)
    try:
        assert queries.is_demo(store)
        with store.reader.connect() as conn:
            states = set(conn.execute(sa.text("SELECT DISTINCT state FROM operations")).scalars())
            reasons = set(conn.execute(sa.text("SELECT DISTINCT reason FROM holds")).scalars())
            ids = conn.execute(sa.text("SELECT operation_id FROM operations")).scalars().all()
            gone = conn.execute(
                sa.text("SELECT count(*) FROM executions WHERE gone_at IS NOT NULL")
            ).scalar_one()
            resolved = conn.execute(
                sa.text("SELECT count(*) FROM holds WHERE resolved_by LIKE 'operator:%'")
            ).scalar_one()
        assert states == {"prepared", "dispatching", "confirmed", "failed", "cancelled"}
        assert reasons == HOLD_REASONS
        assert all(i.startswith("demo:") for i in ids)
        assert gone > 0 and resolved > 0
        assert any(s["status"] == "error" for s in queries.list_sources(store))
        blocking = holds.hold_queue(store, datetime.now(UTC), flt=holds.HoldFilter(blocking=True))
        assert {h["reason"] for h in blocking} == {r.value for r in BLOCKING_REASONS}
        # A dispatch turned away while another execution was writing (it opens no hold).
        turned = operations.turned_away(store, "demo:crm:contact-377:upsert")
        assert [(t["data"]["reason"], t["data"]["in_flight"]) for t in turned] == [
            ("in_flight", "7420")
        ]
    finally:
        store.dispose()


def identity(db: str) -> tuple[str, int, str]:
    """The ledger's id and its chain head: what a rebuild changes and a second run keeps."""
    store = open_store(db)
    try:
        ledger_id, _ = chain.identity_of(store)
        seq, head = chain.chain_head(store)
    finally:
        store.dispose()
    return ledger_id, seq, head


def test_demo_run_again_keeps_the_demo_it_built(tmp_path: Path) -> None:
    demo_db = str(tmp_path / "demo.db")
    first = runner.invoke(app, ["demo", "--db", demo_db])
    assert first.exit_code == 0, first.output
    built = identity(demo_db)
    again = runner.invoke(app, ["demo", "--db", demo_db])
    assert again.exit_code == 0, again.output
    assert "as built before" in again.output and "--fresh" in again.output
    assert f"try it: flowledger tui --db {demo_db}" in again.output
    assert identity(demo_db) == built


def test_demo_fresh_builds_the_demo_again(tmp_path: Path) -> None:
    demo_db = str(tmp_path / "demo.db")
    assert runner.invoke(app, ["demo", "--db", demo_db]).exit_code == 0
    built = identity(demo_db)
    fresh = runner.invoke(app, ["demo", "--fresh", "--db", demo_db])
    assert fresh.exit_code == 0, fresh.output
    assert "made-up data" in fresh.output and "as built before" not in fresh.output
    rebuilt = identity(demo_db)
    assert rebuilt[0] != built[0] and rebuilt[1] == built[1]
    # Where there is none yet, --fresh builds one.
    other = str(tmp_path / "other.db")
    assert runner.invoke(app, ["demo", "--fresh", "--db", other]).exit_code == 0
    assert identity(other)[1] == built[1]


def test_demo_refuses_a_real_ledger_and_fresh_deletes_none(tmp_path: Path) -> None:
    real = str(tmp_path / "real.db")
    assert runner.invoke(app, ["init", "--db", real]).exit_code == 0
    refused = runner.invoke(app, ["demo", "--db", real])
    assert refused.exit_code == 2 and "is not a demo ledger" in refused.output
    kept = runner.invoke(app, ["demo", "--fresh", "--db", real])
    assert kept.exit_code == 2 and "deletes only a ledger that `flowledger demo` built" in (
        kept.output
    )
    store = open_store(real)
    try:
        assert chain.chain_head(store)[0] == 0 and not queries.is_demo(store)
    finally:
        store.dispose()
    notes = tmp_path / "notes.txt"
    notes.write_text("not a ledger")
    not_sqlite = runner.invoke(app, ["demo", "--fresh", "--db", str(notes)])
    assert not_sqlite.exit_code == 2 and "not a SQLite database" in not_sqlite.output
    assert notes.read_text() == "not a ledger"


def test_build_demo_refuses_a_demo_that_holds_its_shift(tmp_path: Path) -> None:
    demo_db = str(tmp_path / "demo.db")
    assert runner.invoke(app, ["demo", "--db", demo_db]).exit_code == 0
    store = open_store(demo_db)
    try:
        with pytest.raises(LedgerError, match=r"already holds demo data.*demo --fresh"):
            demo.build_demo(store, demo_db)
    finally:
        store.dispose()


def test_handover_command_prints_the_report(tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    runner.invoke(app, ["demo", "--db", db])
    result = runner.invoke(app, ["handover", "--db", db, "--operator", "dave"])
    assert result.exit_code == 0, result.output
    store = open_store(db)
    try:
        seq, head_hash = chain.chain_head(store)
    finally:
        store.dispose()
    assert result.output.startswith("# Handover report")
    assert f"seq {seq}, hash `{head_hash}`" in result.output
    assert "by dave" in result.output and "Demo ledger" in result.output


@pytest.mark.parametrize("typed", ["yesterday 18:00", "yesterday 6pm"])
def test_handover_since_reads_a_typed_time_as_the_terminal_ui_does(
    tmp_path: Path, typed: str
) -> None:
    db = str(tmp_path / "x.db")
    runner.invoke(app, ["init", "--db", db])
    before = datetime.now(UTC)
    result = runner.invoke(app, ["handover", "--db", db, "--since", typed])
    after = datetime.now(UTC)
    assert result.exit_code == 0, result.output
    shifts = {f"Shift: {day - timedelta(days=1):%Y-%m-%d} 18:00 UTC" for day in (before, after)}
    assert any(shift in result.output for shift in shifts), result.output


def test_handover_refuses_bad_options(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    runner.invoke(app, ["init", "--db", db])
    bad_format = runner.invoke(app, ["handover", "--db", db, "--format", "html"])
    assert bad_format.exit_code == 2 and "--format 'html' is not one of: md" in bad_format.output
    future = runner.invoke(app, ["handover", "--db", db, "--since", "2999-01-01T00:00:00"])
    assert future.exit_code == 2 and "future" in future.output
    garbled = runner.invoke(app, ["handover", "--db", db, "--since", "yesterday"])
    assert garbled.exit_code == 2 and garbled.output.count("\n") == 1
    assert "--since 'yesterday': cannot read 'yesterday' as a time; give -2h" in garbled.output
    ahead = runner.invoke(app, ["handover", "--db", db, "--since", "+2h"])
    assert ahead.exit_code == 2 and "is in the future" in ahead.output
    with_offset = runner.invoke(app, ["handover", "--db", db, "--since", "2026-11-02T08:00+01:00"])
    assert with_offset.exit_code == 0 and "Shift: 2026-11-02 07:00 UTC" in with_offset.output
    missing = runner.invoke(app, ["handover", "--db", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2 and "flowledger init" in missing.output
