"""Running the webhook receiver and managing its tokens: ``serve``, ``token create|list|revoke``."""

from __future__ import annotations

from typing import Annotated

import typer

from flowledger.cli import as_json as as_json_doc
from flowledger.cli.common import (
    Command,
    DbOption,
    Group,
    HostOption,
    JsonOption,
    LogFormatOption,
    PortOption,
    TlsCertOption,
    TlsKeyOption,
    app,
    echo_json,
    file_settings,
    ledger_for,
    logging_as,
    one_line_errors,
    one_of,
    opened,
    settings,
)
from flowledger.cli.tables import echo_table, when

token_app = typer.Typer(
    cls=Group,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="API tokens for the webhook receiver.",
)
app.add_typer(token_app, name="token")


@app.command()
@one_line_errors
def serve(
    db: DbOption = None,
    host: HostOption = None,
    port: PortOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    access_log: Annotated[bool, typer.Option(help="Log one line per request")] = True,
    log_format: LogFormatOption = None,
) -> None:
    """Run the webhook receiver (HTTP API) until interrupted."""
    from flowledger.receiver.server import listen, serve_app, tls_files, writer_ended

    env = settings()
    file = logging_as(file_settings(), env, log_format)
    host = host or file.receiver.host
    port = file.receiver.port if port is None else port
    tls = tls_files(tls_cert or file.receiver.tls_cert, tls_key or file.receiver.tls_key)
    sock = listen(host, port)  # first: a taken port is one line, before anything starts
    try:
        # The receiver and the ledger's services, loaded once the files and the port are had.
        from flowledger.receiver.api.tokens import signing_secrets
        from flowledger.receiver.app import create_app
        from flowledger.services.signing import configured_signer
        from flowledger.storage.reads.tree_proofs import ledger_origin

        with opened(db) as store:
            ledger = ledger_for(store, env, file, signing_secrets(store, env.secret_bytes()))
            application = create_app(
                ledger,
                config=file.receiver,
                secret=env.secret_bytes(),
                writer_process=True,
                signer=configured_signer(file.checkpoints, ledger_origin(store)),
            )
            serve_app(
                application,
                sock,
                access_log=access_log,
                secrets=lambda: ledger.secrets,
                limits=file.receiver,
                tls=tls,
            )
            writer_ended(application)
    finally:
        sock.close()


Scope = Annotated[str, typer.Option("--scope", metavar="SCOPE", help="write | read | operator")]


@token_app.command("create")
@one_line_errors
def token_create(
    name: Annotated[
        str, typer.Option("--name", metavar="NAME", help="A name to list and revoke it by")
    ],
    scope: Scope,
    signing: Annotated[
        bool, typer.Option("--signing", help="Also require HMAC-signed requests")
    ] = False,
    db: DbOption = None,
) -> None:
    """Create a token and print it once (with its signing secret when --signing)."""
    from flowledger.receiver.api.tokens import SCOPES, create_token

    one_of("--scope", scope, SCOPES)
    env = settings()
    with opened(db) as store:
        made = create_token(
            ledger_for(store, env), name, scope, signing=signing, server_secret=env.secret_bytes()
        )
    typer.echo(f"token {made.name} ({made.scope}) created; it is shown only this once:")
    typer.echo(made.token)
    if made.signing_secret is not None:
        typer.echo("signing secret (shown only this once):")
        typer.echo(made.signing_secret)


@token_app.command("list")
@one_line_errors
def token_list(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Tokens by name: scope, signing, created, last used (to the minute a running receiver
    writes it) and revoked; never the token."""
    from flowledger.receiver.api.tokens import list_tokens

    with opened(db) as store:
        rows = list_tokens(store)
    if as_json:
        echo_json(as_json_doc.tokens(rows))
        return
    if not rows:
        typer.echo("no tokens; create one with `flowledger token create --name NAME --scope write`")
        return
    echo_table(
        (
            (
                r["name"],
                r["scope"],
                "yes" if r["signing"] else "no",
                when(r["created_at"]),
                when(r["last_used_at"]) if r["last_used_at"] else "never",
                f"revoked {when(r['revoked_at'])}" if r["revoked_at"] else "active",
            )
            for r in rows
        ),
        header=("NAME", "SCOPE", "SIGNING", "CREATED", "LAST USED", "STATE"),
    )


@token_app.command("revoke", cls=Command)
@one_line_errors
def token_revoke(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The name it was created with")],
    db: DbOption = None,
) -> None:
    """Revoke a token by name (a running receiver refuses it within 2 seconds)."""
    from flowledger.receiver.api.tokens import revoke_token

    with opened(db) as store:
        revoke_token(ledger_for(store), name)
    typer.echo(f"token {name} revoked")
