"""Connecting an n8n instance to the ledger: ``n8n setup``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    DbOption,
    Group,
    app,
    die,
    file_settings,
    ledger_for,
    one_line_errors,
    opened,
    settings,
)
from flowledger.cli.tables import echo_table, printable

if TYPE_CHECKING:
    import httpx

    from flowledger.config import ReceiverConfig

n8n_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Connect an n8n instance to the ledger.",
)
app.add_typer(n8n_app, name="n8n")


def _client() -> httpx.Client:
    import httpx

    return httpx.Client(timeout=30.0)


# How the command reaches n8n; tests put a client on a fake n8n here.
client_factory: Callable[[], httpx.Client] = _client


def default_ledger_url(receiver: ReceiverConfig) -> str:
    """Where a local n8n reaches ``flowledger serve`` as ``[receiver]`` configures it."""
    host = receiver.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{receiver.port}"


@n8n_app.command("setup")
@one_line_errors
def n8n_setup(
    source: Annotated[
        str, typer.Option("--source", metavar="NAME", help="The n8n source in flowledger.toml")
    ],
    ledger_url: Annotated[
        str | None,
        typer.Option(
            "--ledger-url",
            metavar="URL",
            help="Where n8n reaches the ledger [default: http://<receiver.host>:<receiver.port>]",
        ),
    ] = None,
    with_example: Annotated[
        bool, typer.Option("--with-example", help="Also import the guarded-write template")
    ] = False,
    workflow: Annotated[
        list[str] | None,
        typer.Option(
            "--workflow",
            metavar="WORKFLOW_ID",
            help="Set the error workflow on this workflow id (repeatable)",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Create a write token, the n8n credential and the error workflow in that n8n (each only
    when one of that name is not there yet); print what was made, with ids and links."""
    from flowledger.n8n.setup import SetupFailed, SetupRequest, setup
    from flowledger.receiver.api.tokens import create_token, list_tokens, revoke_token

    file = file_settings()
    cfg = file.source(source)
    if cfg.kind != "n8n":
        die(f"source {source!r} is kind {cfg.kind}, not n8n")
    if ledger_url is None:
        ledger_url = default_ledger_url(file.receiver)
        typer.echo(
            f"n8n will reach the ledger at {ledger_url} (from [receiver] in flowledger.toml); "
            "an n8n in a container needs another address, e.g. "
            f"--ledger-url http://host.docker.internal:{file.receiver.port}"
        )
    elif not ledger_url.startswith(("http://", "https://")) or any(c.isspace() for c in ledger_url):
        die("--ledger-url must be an http:// or https:// URL")
    ledger_url = ledger_url.rstrip("/")
    request = SetupRequest(
        source=source,
        n8n_url=cfg.base_url,
        api_key=cfg.secret(cfg.api_key_env),
        ledger_url=ledger_url,
        with_example=with_example,
        workflows=tuple(workflow or ()),
    )
    env = settings()
    with opened(db) as store:
        ledger = ledger_for(store, env, file)

        def make_token(base: str) -> tuple[str, str]:
            taken = {t["name"] for t in list_tokens(store)}
            name = next(n for n in _names(base) if n not in taken)
            made = create_token(ledger, name, "write", signing=False, server_secret=None)
            return made.name, made.token

        try:
            with client_factory() as client:
                report = setup(client, request, make_token, lambda name: revoke_token(ledger, name))
        except SetupFailed as exc:
            # n8n's answer may quote the request, key included.
            typer.echo(printable(ledger.redact(f"flowledger: n8n setup: {exc}")), err=True)
            raise typer.Exit(1) from None
    installed = "installed" if report.node_installed else "not installed: Header Auth template"
    typer.echo(printable(f"n8n at {cfg.base_url}: Flowledger node {installed}"))
    echo_table(
        (step.action, step.kind, step.name, step.id or "-", step.note or "-")
        for step in report.steps
    )
    for link in report.links:
        typer.echo(printable(f"open {link}"))
    for line in report.scope_notes:
        typer.echo(printable(ledger.redact(f"note: {line}")))


def _names(base: str) -> list[str]:
    clean = "".join(c if c.isalnum() or c in "_.:@-" else "-" for c in base)[:180]
    return [clean, *(f"{clean}-{n}" for n in range(2, 1000))]
