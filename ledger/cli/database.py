"""Creating, migrating and diagnosing a ledger database: ``init``, ``migrate``, ``doctor``."""

from __future__ import annotations

import sqlite3

import sqlalchemy as sa
import typer

from ledger.cli.common import DbOption, app, die, one_line_errors, opened
from ledger.storage import migrate as migrations
from ledger.storage.engine import (
    CHECKPOINT_EVERY,
    WAL_RESET_AFFECTED,
    LedgerError,
    hide_password,
    make_store,
    read_schema_version,
    resolve_url,
    sqlite_path,
)
from ledger.storage.models import SCHEMA_VERSION

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


@app.command()
@one_line_errors
def init(db: DbOption = None) -> None:
    """Create a ledger (the only command that creates a database)."""
    store, created = migrations.init_ledger(db)
    where = hide_password(store.url)
    store.dispose()
    if created:
        typer.echo(f"created ledger at {where} (schema version {SCHEMA_VERSION})")
    else:
        typer.echo(f"ledger at {where} already exists; nothing to do")


@app.command()
@one_line_errors
def migrate(db: DbOption = None) -> None:
    """Upgrade an existing ledger's schema to the version this flowledger knows."""
    url = resolve_url(db)
    store = make_store(url)
    try:
        try:
            before = read_schema_version(store.engine)
        except sa.exc.DBAPIError as exc:
            raise LedgerError(
                f"cannot open {hide_password(url)}: {str(exc.orig).splitlines()[0]}"
            ) from exc
        if before is None:
            die(f"{hide_password(url)} holds no ledger; run `flowledger init` to create one")
        assert before is not None
        if before > SCHEMA_VERSION:
            die(
                f"schema version {before} is newer than this flowledger ({SCHEMA_VERSION}); "
                "upgrade flowledger"
            )
        migrations.upgrade(store)
        after = read_schema_version(store.engine)
    finally:
        store.dispose()
    if before == after:
        typer.echo(f"schema version {after} is current; nothing to do")
    else:
        typer.echo(f"migrated schema version {before} -> {after}")


@app.command()
@one_line_errors
def doctor(db: DbOption = None) -> None:
    """Report the database, the SQLite build and its known bugs, and the schema."""
    with opened(db) as store:
        typer.echo(f"database:        {hide_password(store.url)}")
        typer.echo(f"schema version:  {SCHEMA_VERSION} (current)")
        typer.echo(
            f"alembic:         {migrations.current_revision(store)} "
            f"(head {migrations.head_revision()})"
        )
        if sqlite_path(store.url) is None:
            with store.engine.connect() as conn:
                version = conn.exec_driver_sql("SHOW server_version").scalar()
            typer.echo(f"postgresql:      {version}")
            return
        with store.engine.connect() as conn:
            raw = conn.connection.driver_connection
            assert raw is not None
            journal = raw.execute("PRAGMA journal_mode").fetchone()[0]
            sync = raw.execute("PRAGMA synchronous").fetchone()[0]
            busy = raw.execute("PRAGMA busy_timeout").fetchone()[0]
            fks = raw.execute("PRAGMA foreign_keys").fetchone()[0]
        typer.echo(f"sqlite build:    {sqlite3.sqlite_version}")
        if WAL_RESET_AFFECTED:
            typer.echo(
                "wal-reset bug:   AFFECTED (3.7.0-3.51.2 but 3.44.6, 3.50.7): a "
                "checkpoint racing a commit on another connection can corrupt the file"
            )
            typer.echo(
                f"  the ledger:    turns automatic checkpoints off and checkpoints with "
                f"wal_checkpoint(FULL), which holds the writer lock, every "
                f"{CHECKPOINT_EVERY} commits and at shutdown; upgrade SQLite "
                "(3.51.3+) or use PostgreSQL for several writing processes"
            )
        else:
            typer.echo("wal-reset bug:   not affected")
        typer.echo(f"journal mode:    {journal}")
        typer.echo(f"synchronous:     {SYNCHRONOUS.get(sync, sync)}")
        typer.echo(f"busy timeout:    {busy} ms")
        typer.echo(f"foreign keys:    {'on' if fks else 'off'}")
