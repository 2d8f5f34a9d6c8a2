"""What the ledger pinned in n8n, as ``sources`` lists it and ``sources delete-pinned``
deletes it, and the scopes ``sources check`` says the API key lacks (docs/acting.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowledger.cli.common import (
    FAILED,
    NOT_FOUND,
    DbOption,
    die,
    file_settings,
    ledger_for,
    one_line_errors,
    opened,
)
from flowledger.cli.tables import echo_table, printable, when
from flowledger.domain.display import counted

if TYPE_CHECKING:
    from flowledger.config import SourceConfig

# A pin or retry refused for a scope the key lacks that long is one nobody noticed: ``doctor``
# warns (the backoff alone would keep trying, quietly, for ever).
SCOPE_WAIT = timedelta(hours=1)


def check_scopes(cfg: SourceConfig) -> None:
    """Name each scope the n8n API key lacks for what the ledger does in n8n."""
    from flowledger.connectors.n8n_actions import N8nActions, scope_lines
    from flowledger.sync.connect import connector_settings, make_client, scrub

    with make_client(cfg) as client:
        actions = N8nActions(client, connector_settings(cfg))
        for line in scope_lines(actions, pins=cfg.pin_evidence):
            typer.echo(printable(f"{cfg.name}: {scrub(line, cfg)}"))


def echo_pinned(kept: list[dict[str, Any]]) -> None:
    typer.echo(
        f"\n{counted(len(kept), 'execution')} pinned in n8n for holds now resolved: n8n keeps "
        "them until they are deleted (flowledger sources delete-pinned NAME):"
    )
    echo_table(
        [
            (
                p["source"],
                p["execution_id"],
                when(p["pinned_at"]),
                when(p["resolved_at"]),
                p["copy_status"] or "no copy",
            )
            for p in kept
        ],
        header=("SOURCE", "EXECUTION", "PINNED", "HOLDS RESOLVED", "LEDGER COPY"),
        indent=2,
    )


def waiting_row(w: dict[str, Any]) -> tuple[object, ...]:
    """One line of what waits to be done in n8n (a kind and source of :func:`waiting`)."""
    what = counted(w["count"], w["what"])
    return (w["source"] or "no source", what, f"since {when(w['since'])}",
            w["last_error"] or "not tried yet")  # fmt: skip


def echo_waiting(found: list[dict[str, Any]], *, indent: int = 2) -> None:
    echo_table([waiting_row(w) for w in found], indent=indent)


def waiting_finding(found: list[dict[str, Any]], now: datetime) -> str:
    """``doctor``'s line for the pins and retries waiting: a warning for those that have
    waited past :data:`SCOPE_WAIT` on a scope the API key lacks (nothing changes until a person
    adds it), else how many wait."""
    stuck = [w for w in found if w["scope"] and w["since"] <= now - SCOPE_WAIT]
    if stuck:
        return "WARNING: " + "; ".join(
            f"{counted(w['count'], w['what'])} of {w['source'] or 'no source'} waiting since "
            f"{when(w['since'])}: {w['last_error']}"
            for w in stuck
        )
    if not found:
        return "no pin or retry waits"
    return ", ".join(f"{counted(w['count'], w['what'])} of {w['source'] or 'no source'} waiting"
                     for w in found)  # fmt: skip


@one_line_errors
def delete_pinned(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The source's name in flowledger.toml")
    ],
    execution: Annotated[
        list[str] | None,
        typer.Option(
            "--execution", metavar="ID", help="Only this execution (repeat for more) [default: all]"
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before deleting (as in a script)")
    ] = False,
    operator: Annotated[
        str | None,
        typer.Option("--operator", metavar="NAME", help="Name recorded [default: your login name]"),
    ] = None,
    db: DbOption = None,
) -> None:
    """Delete in n8n the executions pinned for holds that are all resolved now (as `sources`
    lists them), once the ledger has its copy: n8n keeps a pinned execution until it is
    deleted. Asks first; each deletion is an event. Needs the execution:delete scope."""
    import getpass
    import sys

    from flowledger.scheduled.acting import delete_pinned as delete_them
    from flowledger.storage import acting

    cfg = file_settings().source(name)
    if cfg.kind != "n8n":
        die(f"source {name} is a {cfg.kind} source: only n8n executions are pinned")
    with opened(db) as store:
        with store.reader.connect() as conn:
            kept = acting.pinned_after_holds(conn, name)
        chosen = [p for p in kept if execution is None or p["execution_id"] in execution]
        unknown = sorted(set(execution or ()) - {p["execution_id"] for p in kept})
        if unknown:
            die(
                f"not pinned for resolved holds of {name}: {', '.join(unknown)} (`flowledger "
                "sources` lists those that are)",
                NOT_FOUND,
            )
        # Only once the ledger has its copy: what n8n deletes is gone for good.
        uncopied = [p["execution_id"] for p in chosen if p["copy_status"] is None]
        chosen = [p for p in chosen if p["copy_status"] is not None]
        for execution_id in uncopied:
            typer.echo(
                printable(
                    f"execution {execution_id}: not deleted: the ledger has no copy of it yet "
                    "(flowledger sync --once copies it)"
                )
            )
        if not chosen:
            if not uncopied:
                typer.echo(
                    f"nothing to delete: no execution of {name} is pinned for resolved holds"
                )
            raise typer.Exit(FAILED if uncopied else 0)
        echo_pinned(chosen)
        if not yes:
            if not sys.stdin.isatty():
                die("nothing deleted: stdin is not a terminal to ask at; pass --yes")
            typer.echo(
                f"Delete these {len(chosen)} executions in n8n, for good? [y/N] ",
                err=True,
                nl=False,
            )
            if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                typer.echo("Nothing deleted.", err=True)
                raise typer.Exit(FAILED)
        ids = [p["execution_id"] for p in chosen]
        said = delete_them(ledger_for(store), cfg, ids, operator or getpass.getuser())
    for execution_id, what in said:
        typer.echo(printable(f"execution {execution_id}: {what}"))
    if uncopied or any(what.startswith("not deleted") for _, what in said):
        raise typer.Exit(FAILED)
