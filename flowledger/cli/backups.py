"""Copies of the ledger: ``backup``, and the one ``migrate --backup-dir`` takes first."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    FAILED,
    Command,
    DbOption,
    app,
    die,
    ledger_for,
    one_line_errors,
    opened,
)
from flowledger.domain.display import counted
from flowledger.domain.times import for_people
from flowledger.plumbing.clock import utcnow
from flowledger.storage.problems import LedgerError

if TYPE_CHECKING:
    from flowledger.storage.backups import Check
    from flowledger.storage.engine import Store
    from flowledger.storage.reads import Connection


@app.command(cls=Command)
@one_line_errors
def backup(
    dest: Annotated[
        Path,
        typer.Argument(
            metavar="DEST",
            help="The copy to write (it must not exist), or a directory to write it in, named "
            "for the time it is taken",
        ),
    ],
    db: DbOption = None,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep", help="Check the copy with verify --deep, not only verify (reads it all)"
        ),
    ] = False,
) -> None:
    """Copy the ledger while it runs, owner-only and fsynced, and check the copy with
    verify before saying it is done (SQLite; PostgreSQL: pg_dump -Fc, read back by
    pg_restore --list; restore it into an empty database, or with --clean). A ledger put
    back from the copy says it was restored, and from when, until `flowledger restored
    --ack`."""
    with opened(db) as store:
        written, taken = take_backup(store, dest, deep=deep)
    typer.echo(f"backup taken at {for_people(taken)} written to {written}")


def take_backup(store: Store, dest: Path, *, deep: bool = False) -> tuple[Path, datetime]:
    """Write a checked copy of ``store`` to ``dest`` (or a file named for now in it) and
    say how long the copy took and how it checked; returns where it went and when it was
    taken. A schema this flowledger does not know (a copy taken before ``migrate``) is
    checked by SQLite's integrity check alone."""
    from flowledger.storage import backups
    from flowledger.storage.engine import read_schema_version, sqlite_path
    from flowledger.storage.models import SCHEMA_VERSION

    taken = utcnow()
    postgres = sqlite_path(store.url) is None
    path = backups.destination(dest.expanduser().absolute(), taken, postgres)
    current = read_schema_version(store.reader) == SCHEMA_VERSION

    def copied(seconds: float, size: int) -> None:
        typer.echo(f"copied {_size(size)} in {seconds:.1f} s")

    dumped = backups.back_up(store, path, taken, _checked(deep) if current else None, copied)
    if dumped is not None:
        typer.echo(
            f"dumped: {counted(dumped.events, 'event')}, head seq {dumped.seq} hash {dumped.hash}"
        )
    return path, taken


def _size(size: int) -> str:
    """In MiB, or in KiB under one (a new ledger's copy is not "0.0 MiB")."""
    if size < 2**20:
        return f"{size / 2**10:,.1f} KiB"
    return f"{size / 2**20:,.1f} MiB"


def _checked(deep: bool) -> Check:
    """``verify`` (and with ``deep``, ``verify --deep``) on the copy, said as it says it."""

    def check(conn: Connection) -> None:
        from flowledger.storage.reads import chain
        from flowledger.storage.reads.replay import deep_verify

        result = chain.verify(conn)
        if not result.ok:
            raise LedgerError(f"the copy fails verify: {result.problem}; it was removed")
        typer.echo(
            f"copy verified: {counted(result.checked, 'event')}, head seq {result.head_seq} "
            f"hash {result.head_hash}"
        )
        if deep:
            found = deep_verify(conn)
            if not found.ok:
                raise LedgerError(
                    f"the copy fails verify --deep ({counted(len(found.findings), 'difference')}"
                    "); it was removed"
                )
            typer.echo(f"copy verified deep: {counted(found.operations, 'operation')} replayed")

    return check


@app.command()
@one_line_errors
def restored(
    db: DbOption = None,
    ack: Annotated[
        bool,
        typer.Option(
            "--ack",
            help="Acknowledge the restore: you checked what happened after the backup was taken",
        ),
    ] = False,
    note: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="With --ack: what you checked (required)"),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="Name recorded with the acknowledgement [default: your login name]"
        ),
    ] = None,
) -> None:
    """Whether this ledger was put back from a backup, and from when; with --ack, record
    (an event under your name, with the note) that you checked what the workflows did since
    the backup was taken, and stop the warning in status, doctor and the terminal UI. Exit 1
    when it was restored and not acknowledged."""
    import getpass

    from flowledger.domain import IllegalTransition
    from flowledger.services import restores
    from flowledger.services.values import InvalidInput
    from flowledger.storage.reads import records

    if note is not None and not ack:
        die("--note goes with --ack")
    with opened(db) as store:
        if not ack:
            taken = records.restored_from(store)
            if taken is None:
                typer.echo("not restored from a backup (or the restore was acknowledged)")
                return
            typer.echo(restores.warning(taken))
            raise typer.Exit(FAILED)
        if not note:
            die("--ack needs --note TEXT: what you checked of the executions since the backup")
        who = operator or getpass.getuser()
        try:
            taken = restores.acknowledge_restore(ledger_for(store), operator=who, note=note)
        except (IllegalTransition, InvalidInput) as exc:  # a blank or too long note or name
            die(str(exc))
    typer.echo(f"restore from the backup taken at {for_people(taken)} acknowledged by {who}")
