"""The person on duty's commands: ``tui``, ``handover`` and ``demo``."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Annotated

import typer

from flowledger.cli.common import (
    DbOption,
    app,
    die,
    handles_broken_settings,
    ledger_for,
    one_line_errors,
    one_of,
    opened,
    parse_since,
)
from flowledger.domain.display import counted
from flowledger.plumbing.clock import utcnow
from flowledger.storage.problems import LedgerError

DEMO_DB = "./var/demo.db"  # where `demo` builds its ledger unless told


@app.command()
@one_line_errors
@handles_broken_settings
def tui(
    db: DbOption = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Look only: no action is offered")
    ] = False,
    operator: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="Name recorded with every action [default: your login name]"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            file_okay=False,
            metavar="DIR",
            help="Folder for the handover reports H saves [default: ./var/handover]",
        ),
    ] = None,
) -> None:
    """The terminal UI: the attention queue, operation detail, actions and handover."""
    from flowledger.config import FileConfig, load_config
    from flowledger.tui import make_app

    # A broken flowledger.toml does not keep the person on shift out (every other command
    # refuses it): the UI opens on the defaults and its Sources tab says what is wrong.
    try:
        file, problem = load_config(), None
    except LedgerError as exc:
        file, problem = FileConfig(), str(exc)
    with opened(db) as store:
        make_app(
            ledger_for(store, file=file),
            operator=operator or getpass.getuser(),
            read_only=read_only,
            report_dir=out.absolute() if out else None,
            config_error=problem,
        ).run()


@app.command()
@one_line_errors
def handover(
    db: DbOption = None,
    format: Annotated[str, typer.Option("--format", metavar="FORMAT", help="Output format")] = "md",
    since: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Start of the shift: -8h or 8h (eight hours ago), 6am (the last one), "
            "yesterday 18:00, or ISO 8601 (UTC unless it names its offset) [default: 12h ago]",
        ),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Who writes the report [default: your login name]"),
    ] = None,
    save: Annotated[
        bool,
        typer.Option("--save", help="Keep the report as a new file (in --out) and print its path"),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            file_okay=False,
            metavar="DIR",
            help="Folder for saved reports; implies --save [default: ./var/handover]",
        ),
    ] = None,
) -> None:
    """The handover report (Markdown): open holds by owner, what the shift resolved, sources
    in trouble, and the chain's head hash. On stdout, or with --save or --out as a new file
    named after the time (never overwriting another)."""
    from flowledger.reports import handover as report

    one_of("--format", format, ("md",))
    now = utcnow()
    start = parse_since(since, now) or now - report.DEFAULT_SHIFT
    with opened(db) as store:
        text = report.build(store, report.Shift(start, now, operator or getpass.getuser()), now=now)
    if not (save or out):
        typer.echo(text, nl=False)
        return
    try:
        path = report.save(text, out or report.DEFAULT_FOLDER, now)
    except OSError as exc:
        die(f"cannot save the report in {out or report.DEFAULT_FOLDER}: {exc.strerror or exc}")
    typer.echo(f"handover report saved to {path}")


@app.command()
@one_line_errors
def demo(
    db: Annotated[
        str,
        typer.Option("--db", metavar="PATH", help="Where to build the demo ledger (a new file)"),
    ] = DEMO_DB,
    fresh: Annotated[
        bool,
        typer.Option("--fresh", help="Delete the demo ledger at PATH and build it again"),
    ] = False,
) -> None:
    """Build a separate ledger holding a made-up shift, to try the terminal UI. Run again, it
    leaves the demo ledger it built as it is; --fresh builds it again from scratch."""
    from flowledger.programs import demo as demo_data
    from flowledger.storage.engine import open_store
    from flowledger.storage.migrate import init_ledger

    if "://" in db:
        raise LedgerError("the demo ledger is a local SQLite file; give a path")
    path = Path(db)
    if fresh and path.exists():
        _remove_demo(db)
    if path.exists():
        store = open_store(db)
    else:
        store, _ = init_ledger(db)
        demo_data.mark_demo(store)
    try:
        built = not demo_data.built_already(store, db)
        if built:
            demo_data.build_demo(store, db)
        counts = demo_data.demo_counts(store)
    finally:
        store.dispose()
    held = (
        f"{counted(counts['operations'], 'operation')}, "
        f"{counted(counts['open_holds'], 'open hold')}"
    )
    if built:
        typer.echo(f"demo ledger at {db}: {held} (made-up data)")
    else:
        typer.echo(
            f"demo ledger at {db}, as built before: {held} (made-up data; --fresh builds it again)"
        )
    typer.echo(f"try it: flowledger tui --db {db}")


def _remove_demo(where: str) -> None:
    """Delete the demo ledger at ``where`` (the file, its ``-wal`` and ``-shm``) so that it can
    be built again; any other file is refused and left as it is."""
    from flowledger.storage.engine import sqlite_files, sqlite_path
    from flowledger.storage.reads import records

    with opened(where) as store:
        path = sqlite_path(store.url)
        if path is None or not records.is_demo(store):
            raise LedgerError(
                f"{where} is not a demo ledger; --fresh deletes only a ledger that "
                "`flowledger demo` built"
            )
    for name in sqlite_files(path):
        name.unlink(missing_ok=True)
