"""Sources and their executions: ``sources``, ``sources check``, ``sync --once``,
``executions``."""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    FAILED,
    NOT_FOUND,
    Command,
    DbOption,
    Group,
    JsonOption,
    app,
    die,
    echo_json,
    file_settings,
    ledger_for,
    one_line_errors,
    one_of,
    opened,
    parse_since,
)
from flowledger.cli.pins import check_scopes, delete_pinned, echo_pinned, echo_waiting
from flowledger.cli.tables import echo_table, printable, when
from flowledger.connectors.base import STATUSES
from flowledger.domain.display import counted
from flowledger.plumbing.clock import utcnow

if TYPE_CHECKING:
    from flowledger.config import FileConfig, SourceConfig
    from flowledger.services.ledger import Ledger
    from flowledger.sync import SyncReport

# What `sources` shows as a source's STATUS (the last sync's outcome, as stored), and what
# each means.
SOURCE_STATUSES = {
    "new": "configured, never synced yet",
    "ok": "the last sync succeeded",
    "error": "the last sync failed; the next one tries again",
    "stopped": "the last sync met what a person must fix (a refused API key, no API at the "
    "base URL, a malformed answer, a missing setting)",
    "unconfigured": "in the ledger, no longer in flowledger.toml",
}

sources_app = typer.Typer(
    cls=Group,
    rich_markup_mode=None,
    help="Configured workflow-tool instances and how their sync stands.",
    # \b: click keeps the paragraph's lines as they are.
    epilog="\b\nSTATUS, as `flowledger sources` shows it (LAST ERROR says why it is not ok):\n"
    + "\n".join(
        textwrap.fill(f"{name}: {meaning}", 78, initial_indent="  ", subsequent_indent="    ")
        for name, meaning in SOURCE_STATUSES.items()
    ),
)
app.add_typer(sources_app, name="sources")

SourceOption = Annotated[
    str | None, typer.Option("--source", metavar="NAME", help="Only this source")
]


def _lag(since: datetime, now: datetime) -> int:
    """Whole seconds from ``since`` to ``now``; 0 for a time ahead of the clock."""
    return int(max(timedelta(0), now - since).total_seconds())


def _age(s: int | None) -> str:
    if s is None:
        return "never"
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def _selected(file: FileConfig, name: str | None) -> list[SourceConfig]:
    if name is not None:
        return [file.source(name)]
    if not file.sources:
        die("no sources configured: add a [[sources]] table to flowledger.toml (see README)")
    return list(file.sources)


@sources_app.callback(invoke_without_command=True)
@one_line_errors
def sources(ctx: typer.Context, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every source: kind, status, its last sync attempt and its last successful sync (with
    the lag since), and the last error. With --json, the lag in seconds (null: never synced)
    and whether flowledger.toml configures it."""
    if ctx.invoked_subcommand is not None:
        return
    from flowledger.storage import acting
    from flowledger.storage.reads import records

    file = file_settings()
    with opened(db) as store:
        stored = {s["name"]: s for s in records.list_sources(store)}
        with store.reader.connect() as conn:
            kept = acting.pinned_after_holds(conn)
            waits = acting.waiting(conn)
    now = utcnow()
    names = [s.name for s in file.sources] + sorted(set(stored) - {s.name for s in file.sources})
    configured = {s.name: s for s in file.sources}
    found = []
    for name in names:
        row = stored.get(name, {})
        success = row.get("last_success_at")
        found.append(
            {
                "name": name,
                "kind": configured[name].kind if name in configured else row.get("kind", "?"),
                "status": row.get("status", "new") if name in configured else "unconfigured",
                "configured": name in configured,
                "last_sync_at": row.get("last_sync_at"),  # every attempt sets it, failed or not
                "last_success_at": success,
                "lag_seconds": None if success is None else _lag(success, now),
                "last_error": row.get("last_error"),
                # Executions pinned in the tool for holds all resolved now: a person may
                # delete them there (`sources delete-pinned`); the ledger never does on its own.
                "pinned_after_holds": [
                    {k: p[k] for k in ("execution_id", "pinned_at", "resolved_at", "copy_status")}
                    for p in kept
                    if p["source"] == name
                ],
                # Pins and retries not made yet (n8n down, starting, or a scope the key
                # lacks), each kind with its newest error.
                "acting_waiting": [
                    {k: w[k] for k in ("what", "count", "since", "last_error")}
                    for w in waits
                    if w["source"] == name
                ],
            }
        )
    if as_json:
        echo_json(found)
        return
    if not found:
        typer.echo("no sources configured (add [[sources]] to flowledger.toml)")
        return
    echo_table(
        [
            (
                s["name"],
                s["kind"],
                s["status"],
                when(s["last_sync_at"]),
                when(s["last_success_at"]),
                _age(s["lag_seconds"]),
                s["last_error"] or "-",
            )
            for s in found
        ],
        header=(
            "NAME",
            "KIND",
            "STATUS",
            "LAST ATTEMPT",
            "LAST SUCCESS",
            "LAG",
            "LAST ERROR",
        ),
    )
    if kept:
        echo_pinned(kept)
    if waits:
        typer.echo("\npins and retries waiting to be made in n8n (`flowledger act --once` tries):")
        echo_waiting(waits)


sources_app.command("delete-pinned", cls=Command)(delete_pinned)


@sources_app.command("check", cls=Command)
@one_line_errors
def check(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The source's name in flowledger.toml")
    ],
) -> None:
    """One live call to the source; says plainly what is wrong, or what answered."""
    from flowledger.connectors.base import ConnectorError
    from flowledger.sync import check_source

    cfg = file_settings().source(name)
    try:
        answer = check_source(cfg)
    except ConnectorError as exc:
        typer.echo(printable(f"{name}: FAILED: {exc}"), err=True)
        raise typer.Exit(FAILED) from None
    typer.echo(printable(f"{name}: ok: {answer}"))
    if cfg.kind == "n8n":
        check_scopes(cfg)


@app.command()
@one_line_errors
def sync(
    db: DbOption = None,
    once: Annotated[bool, typer.Option("--once", help="Sync each source once, then exit")] = False,
    source: SourceOption = None,
    reconcile: Annotated[
        bool,
        typer.Option("--reconcile", help="Also walk the tool's whole list to mark pruned copies"),
    ] = False,
) -> None:
    """Pull execution records from the configured sources into the ledger."""

    if not once:
        die("give --once: this command syncs once; the scheduler syncs at each source's interval")
    file = file_settings()
    chosen = _selected(file, source)
    failed = 0
    with opened(db) as store:
        ledger = ledger_for(store, file=file)
        for cfg in chosen:
            report = _run_one(ledger, cfg, True if reconcile else None)
            failed += not report.ok
            typer.echo(printable(ledger.redact(_summary(report))))
    if failed:
        raise typer.Exit(FAILED)


def _run_one(ledger: Ledger, cfg: SourceConfig, reconcile: bool | None) -> SyncReport:
    """One source's sync, with a progress bar when stderr is a terminal (a long backfill)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from flowledger.sync import sync_source

    console = Console(stderr=True)
    if not console.is_terminal:
        return sync_source(ledger, cfg, reconcile=reconcile)
    name = cfg.name
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        TextColumn("{task.completed} executions, {task.fields[pages]} pages"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(name, total=None, pages=0)

        def advance(report: SyncReport) -> None:
            bar.update(
                task,
                completed=report.new + report.changed,
                total=report.total,
                pages=report.pages,
            )

        return sync_source(ledger, cfg, reconcile=reconcile, progress=advance)


def _summary(r: SyncReport) -> str:
    counts = (
        f"{counted(r.pages, 'page')}, {r.new} new, {r.changed} changed, {r.refreshed} refreshed, "
        f"{r.gone} gone, {r.linked} linked"
        + (f", reconciled ({r.recovered} recovered)" if r.reconciled else "")
        + (
            f", {counted(r.versions_read, 'version')} read ({r.stale_versions} stale)"
            if r.versions_read or r.stale_versions
            else ""
        )
        + (f", waited {r.waited:.0f}s" if r.waited else "")
    )
    notes = "".join(f"; note: {n}" for n in r.notes)
    if r.ok:
        return f"{r.source}: ok: {counts}{notes}"
    return f"{r.source}: {r.status.upper()}: {r.error} (kept what was stored: {counts})"


@app.command()
@one_line_errors
def executions(
    db: DbOption = None,
    source: SourceOption = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help=f"Only this status: {', '.join(STATUSES)}",
        ),
    ] = None,
    gone: Annotated[
        bool, typer.Option("--gone", help="Only copies the tool no longer has (pruned, deleted)")
    ] = False,
    as_json: JsonOption = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=1000, metavar="N", help="How many rows")
    ] = 50,
    after: Annotated[
        int | None,
        typer.Option("--after", metavar="ROW_ID", help="Continue after this row id (from --json)"),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Only those started at or after this time (queued ones: first seen), as "
            "export --since reads it",
        ),
    ] = None,
) -> None:
    """The ledger's copies of execution records, most recently started first."""
    from flowledger.storage.reads import records
    from flowledger.storage.reads.execution_copies import list_executions

    one_of("--status", status, STATUSES)
    start = parse_since(since, utcnow())
    with opened(db) as store:
        if source is not None:
            known = {s.name for s in file_settings().sources}
            known |= {s["name"] for s in records.list_sources(store)}
            one_of("--source", source, known, NOT_FOUND)
        found = list_executions(
            store,
            source=source,
            status=status,
            gone=True if gone else None,
            after=after,
            limit=limit,
            since=start,
        )
    if as_json:
        echo_json(found)
        return
    if not found:
        typer.echo("no executions")
        return
    echo_table(
        [
            (
                e["source"],
                e["external_id"],
                e["workflow_name"] or e["workflow_id"],
                e["status"],
                when(e["started_at"]),
                e["retry_of"],
                when(e["gone_at"]),
            )
            for e in found
        ],
        header=("SOURCE", "ID", "WORKFLOW", "STATUS", "STARTED", "RETRY OF", "GONE"),
    )
    if len(found) == limit:
        typer.echo(f"more: --after {found[-1]['id']}", err=True)
