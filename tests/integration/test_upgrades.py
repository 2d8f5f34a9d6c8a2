"""Upgrading a ledger, on SQLite and PostgreSQL: the rows the code of the first schema wrote
(``tests/fixtures/make_ledger_0001.py``) migrate to the newest unchanged, and ``verify --deep``
finds the tables and the chain agree; two versions of flowledger on one ledger never both hold
the scheduler's lease across a migration."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain import FailOutcome
from flowledger.scheduled.lease import Lease
from flowledger.scheduled.scheduler import Job, Scheduler
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, hide_password, make_store, open_store, resolve_url
from flowledger.storage.migrate import alembic_config, upgrade
from flowledger.storage.models import SCHEMA_VERSION
from tests.support.builders import FakeClock, req

FIXTURE = Path(__file__).parents[1] / "fixtures" / "ledger_0001.json"
KEPT = ("operations", "attempts", "receipts", "holds", "events", "executions", "sources")
runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def first_schema_rows() -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = json.loads(FIXTURE.read_text())
    return rows


def ledger_of_the_first_schema(db: str) -> None:
    """A database made by migration 0001 holding the rows the code of that schema wrote,
    as it would have left them (PostgreSQL's id sequences past the ids taken)."""
    rows = first_schema_rows()
    store = make_store(resolve_url(db), create=True)
    try:
        with store.engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0001")
            tables = sa.MetaData()
            tables.reflect(conn)
            for table in tables.sorted_tables:
                if table.name in ("chain_head", "ledger_meta", "alembic_version"):
                    continue  # made by the migration itself
                if rows[table.name]:
                    conn.execute(table.insert(), [_typed(table, r) for r in rows[table.name]])
                if conn.dialect.name == "postgresql" and "id" in table.c and rows[table.name]:
                    conn.execute(
                        sa.text(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), :n)"),
                        {"n": max(r["id"] for r in rows[table.name])},
                    )
            conn.execute(
                sa.text("UPDATE chain_head SET seq = :seq, hash = :hash WHERE id = 1"),
                rows["chain_head"][0],
            )
    finally:
        store.dispose()


def _typed(table: sa.Table, row: dict[str, Any]) -> dict[str, Any]:
    """A row as SQLite stored it (times as naive UTC text, booleans as 0 and 1), as values."""
    out = dict(row)
    for column in table.c:
        value = row[column.name]
        if value is None:
            continue
        if isinstance(column.type, sa.DateTime):
            out[column.name] = datetime.fromisoformat(value).replace(tzinfo=UTC)
        elif isinstance(column.type, sa.Boolean):
            out[column.name] = bool(value)
    return out


def kept_rows(db: str) -> dict[str, list[dict[str, Any]]]:
    """The tables that carry the ledger's history, in the first schema's columns, with times
    as UTC ISO text (each backend returns them its own way)."""
    first = first_schema_rows()
    store = open_store(db)
    try:
        with store.reader.connect() as conn:
            found = {}
            for name in KEPT:
                columns = sorted(first[name][0])
                table = sa.table(name, *(sa.column(c) for c in columns))
                found[name] = _sorted(
                    {c: _plain(r[c]) for c in columns}
                    for r in conn.execute(sa.select(table)).mappings()
                )
    finally:
        store.dispose()
    return found


def _sorted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    if isinstance(value, bool):
        return int(value)
    return value


def test_a_ledger_of_the_first_schema_migrates_with_its_data_and_verifies_deep(
    db_url: str,
) -> None:
    ledger_of_the_first_schema(db_url)
    code, out = cli("verify", "--db", db_url)
    assert code == 2 and "run `flowledger migrate`" in out and out.count("\n") == 1

    code, out = cli("migrate", "--db", db_url)
    assert code == 0 and f"migrated schema version 1 -> {SCHEMA_VERSION}" in out, out
    code, out = cli("verify", "--deep", "--db", db_url)
    assert code == 0, out
    assert "42 events" in out, out
    first = first_schema_rows()
    assert kept_rows(db_url) == {name: _sorted(first[name]) for name in KEPT}

    # And it grows: the ids go on from the old ones, the chain and the tree from its head.
    store = open_store(db_url)
    try:
        ledger = Ledger(store, clock=FakeClock(datetime(2026, 12, 6, 9, 0, tzinfo=UTC)))
        ledger.dispatch("invoice:INV-10:send", req("x10")).run("token:n8n")
        ledger.fail("invoice:INV-10:send", FailOutcome.UNKNOWN, "timeout").run("token:n8n")
    finally:
        store.dispose()
    code, out = cli("verify", "--deep", "--db", db_url)
    assert code == 0 and "45 events" in out, out


# Two versions of flowledger on one database across a migration: the older one runs, holding
# the scheduler's lease; the newer one migrates the ledger and starts. The older one is the
# same code told it knows the schema before (``schema_version``).

TTL = timedelta(seconds=30)
# The revision before the newest (not SCHEMA_VERSION - 1: a revision's number may skip one).
BEFORE = int(ScriptDirectory.from_config(alembic_config()).get_revision("head").down_revision)


def ledger_before_the_last_migration(db: str) -> Store:
    store = make_store(resolve_url(db), create=True)
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn), f"{BEFORE:04d}")
    return store


def test_an_older_process_gives_the_lease_up_after_a_migration_and_the_newer_takes_it_later(
    db_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="flowledger.scheduled.lease")
    store = ledger_before_the_last_migration(db_url)
    try:
        old = Lease(store, TTL, holder="old", clock=clock, schema_version=BEFORE)
        new = Lease(store, TTL, holder="new", clock=clock)
        ran: list[str] = []
        jobs = Scheduler([Job("sweep", timedelta(minutes=1), lambda: ran.append("old"))], lease=old)
        assert old.renew() and not new.renew()  # the newer one refuses the older schema
        assert jobs.run_job(jobs.jobs["sweep"]) and ran == ["old"]
        clock.advance(seconds=10)
        assert old.renew()  # renewed until 40 s from the start

        upgrade(store)  # the newer flowledger's `migrate`
        clock.advance(seconds=10)
        assert not old.renew() and not old.held()
        assert not jobs.run_job(jobs.jobs["sweep"]) and ran == ["old"]  # its jobs stop
        for _ in range(3):
            assert not new.renew()  # the older one's last renewal has not run out
            assert not old.renew()
            clock.advance(seconds=6)
        clock.advance(seconds=2)  # 40 s: it has
        assert new.renew() and new.held() and not old.renew()
    finally:
        store.dispose()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    where = store.url.database if store.dialect == "sqlite" else hide_password(store.url)
    assert said == [
        f"lease scheduler refused by new: {where} has schema version {BEFORE}, this flowledger"
        f" needs {SCHEMA_VERSION}; run `flowledger migrate`; no scheduled job runs in this process",
        f"lease scheduler given up by old: {where} has schema version {SCHEMA_VERSION}, newer than"
        f" this flowledger knows ({BEFORE}); upgrade flowledger; no scheduled job runs in this"
        " process",
    ]  # once each, however often they ask


@pytest.mark.postgres
def test_a_renewal_during_a_migration_keeps_the_newer_process_out_until_it_runs_out(
    pg_url: str, clock: FakeClock
) -> None:
    """On PostgreSQL the older process's renewal does not wait for the migration's transaction:
    it reads the schema as it was, and the newer process then waits for that renewal to end."""
    store = ledger_before_the_last_migration(pg_url)
    try:
        old = Lease(store, TTL, holder="old", clock=clock, schema_version=BEFORE)
        new = Lease(store, TTL, holder="new", clock=clock)
        assert old.renew()
        clock.advance(seconds=20)
        with store.engine.connect() as conn, conn.begin():
            command.upgrade(alembic_config(conn), "head")
            assert old.renew()  # until 50 s: the migration is not committed yet
        clock.advance(seconds=10)
        assert not old.renew() and not old.held()
        assert not new.renew()
        clock.advance(seconds=20)
        assert new.renew() and not old.renew()
    finally:
        store.dispose()
