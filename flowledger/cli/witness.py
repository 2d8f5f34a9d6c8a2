"""``flowledger witness``: run a witness for another team's ledger (``key create``, ``serve``),
and clear a ledger's alarm once a person has looked at a witness's refusal (``clear``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    FAILED,
    Command,
    DbOption,
    Group,
    app,
    die,
    one_line_errors,
    opened,
    reads_no_settings,
)
from flowledger.storage.problems import LedgerError, Missing

if TYPE_CHECKING:
    from flowledger.domain.cosignatures import Cosigner

witness_app = typer.Typer(
    cls=Group,
    help="A C2SP tlog-witness that cosigns a ledger's checkpoints, and the ledger's witnesses.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(witness_app, name="witness")
key_app = typer.Typer(cls=Group, help="The witness's Ed25519 cosigning key.", no_args_is_help=True)
witness_app.add_typer(key_app, name="key")

KeyPath = Annotated[
    Path, typer.Option("--key", metavar="PATH", help="The witness's key file (PATH.pub beside it)")
]


@key_app.command("create", cls=Command)
@one_line_errors
@reads_no_settings
def witness_key_create(
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="The key file to create (owner-only, 0600)")
    ],
    name: Annotated[
        str,
        typer.Option(
            "--name", metavar="NAME", help="The witness's name, e.g. witness.example.com/w1"
        ),
    ],
) -> None:
    """Make a witness's cosigning key, and its vkey (type 0x04) beside it (PATH.pub)."""
    from flowledger.domain.checkpoints import valid_name
    from flowledger.services.signing import create_cosigner, public_path

    if not valid_name(name):
        die(f"--name {name!r}: a key name is not empty and has no spaces and no '+'")
    path = path.expanduser().absolute()
    cosigner = create_cosigner(path, name)
    typer.echo(f"created witness key {path} (owner only) for {name}")
    typer.echo(f"its vkey (also in {public_path(path)}), for the ledger's [[witnesses]]:")
    typer.echo(f"  {cosigner.verifier.text()}")


@witness_app.command("serve", cls=Command)
@one_line_errors
@reads_no_settings
def witness_serve(
    key: KeyPath,
    log: Annotated[
        list[str],
        typer.Option(
            "--log",
            metavar="VKEY",
            help="A log's verifier key (`flowledger key create` prints it), or a file holding "
            "it; repeat for each log witnessed",
        ),
    ],
    state: Annotated[
        Path,
        typer.Option("--state", metavar="FILE", help="The witness's state (SQLite, made once)"),
    ],
    host: Annotated[str, typer.Option(metavar="HOST", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, metavar="PORT", help="Port to listen on")
    ] = 8788,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Serve HTTPS with this PEM certificate (its chain after it)"
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(metavar="FILE", help="The certificate's PEM private key, unencrypted"),
    ] = None,
) -> None:
    """Serve POST /add-checkpoint (C2SP tlog-witness) for the logs given, until interrupted."""
    from flowledger.config import ReceiverConfig
    from flowledger.domain.checkpoints import CheckpointError, parse_verifier_key
    from flowledger.programs.witness import create_witness_app
    from flowledger.receiver.server import listen, serve_app, tls_files
    from flowledger.storage.witness_state import WitnessState

    cosigner = _cosigner(key)
    try:
        logs = [parse_verifier_key(_key_text(v)) for v in log]
    except CheckpointError as exc:
        raise LedgerError(f"--log: {exc}") from None
    limits = ReceiverConfig()
    tls = tls_files(tls_cert, tls_key, settings=None)  # options only: no [receiver] here
    sock = listen(host, port)
    try:
        application = create_witness_app(WitnessState(state.expanduser()), cosigner, logs)
        typer.echo(f"witness {cosigner.verifier.text()}")
        for k in logs:
            typer.echo(f"  witnessing {k.name}")
        serve_app(application, sock, limits=limits, tls=tls, clear_text=WITNESS_CLEAR_TEXT)
    finally:
        sock.close()


# A witness takes no tokens: what its clients send and get are signed checkpoints.
WITNESS_CLEAR_TEXT = (
    "serving on %s without TLS: checkpoints and cosignatures cross the network in clear text "
    "(signed, so a change is caught, but anyone on the way can read or hold them back); give "
    "--tls-cert and --tls-key, or keep it on 127.0.0.1 behind a TLS proxy"
)


def _cosigner(path: Path) -> Cosigner:
    """The witness's key, named as its vkey beside it names it."""
    from flowledger.domain.checkpoints import COSIGNATURE_V1, CheckpointError, parse_verifier_key
    from flowledger.services.signing import load_cosigner, public_path

    path = path.expanduser()
    if not path.is_file():
        raise LedgerError(f"--key {path}: no such file (make one with `witness key create`)")
    try:
        vkey = parse_verifier_key(_key_text(str(public_path(path))), COSIGNATURE_V1)
    except CheckpointError as exc:
        raise LedgerError(f"{public_path(path)}: {exc}") from None
    cosigner = load_cosigner(path, vkey.name)
    if cosigner.verifier != vkey:
        raise LedgerError(f"{public_path(path)} is not the vkey of the key in {path}")
    return cosigner


def _key_text(value: str) -> str:
    from flowledger.domain.checkpoints import CheckpointError
    from flowledger.programs.verify_proof import key_text

    try:
        return key_text(value)
    except CheckpointError as exc:
        raise LedgerError(str(exc)) from None


@witness_app.command("forget", cls=Command)
@one_line_errors
@reads_no_settings
def witness_forget(
    origin: Annotated[
        str, typer.Argument(metavar="ORIGIN", help="The log's origin (its key's name)")
    ],
    state: Annotated[
        Path,
        typer.Option("--state", metavar="FILE", help="The witness's state (`witness serve`'s)"),
    ],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation")] = False,
) -> None:
    """For the witness's operator, once a log's operator says it was truly restored from a
    backup: forget the checkpoint of ORIGIN the witness holds, so that the log's next
    checkpoint is taken as a first one (kept in the state file's `forgotten` table)."""
    import base64

    from flowledger.storage.witness_state import WitnessState

    path = state.expanduser()
    if not path.is_file():
        die(f"--state {state}: no witness state there")
    witness = WitnessState(path)
    held = witness.held(origin)
    if held is None:
        raise Missing(f"the witness holds no checkpoint of {origin!r}")
    cp = held.checkpoint
    root = base64.b64encode(cp.root).decode()
    typer.echo(f"the witness holds {origin} at {cp.size} events, root {root} ({held.updated_at})")
    if not yes and not typer.confirm(
        "Forget it? Do so only knowing that the log was restored: the witness will then "
        "cosign any history of it, as it did the first",
        default=False,
    ):
        die("nothing forgotten", FAILED)
    if not witness.forget(held):
        die(f"the witness cosigned another checkpoint of {origin} meanwhile: nothing forgotten")
    typer.echo(
        f"forgot {origin} at {cp.size} events, root {root} (kept, with the time, in the state "
        "file's forgotten table): its next checkpoint is taken as a first one"
    )


@witness_app.command("clear", cls=Command)
@one_line_errors
def witness_clear(
    witness: Annotated[str, typer.Argument(metavar="NAME", help="The witness's name, or its vkey")],
    note: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="What you found out about the refusal (required)"),
    ] = None,
    operator: Annotated[
        str | None,
        typer.Option(metavar="NAME", help="Name recorded with the note [default: your login name]"),
    ] = None,
    db: DbOption = None,
) -> None:
    """End the alarm of a witness's refusal, once a person has found out why it refused:
    recorded (an event under your name, with the note) in the ledger's log."""
    import getpass

    from flowledger.cli.common import ledger_for
    from flowledger.domain import IllegalTransition
    from flowledger.services.values import InvalidInput
    from flowledger.services.witness_refusals import clear_refusal
    from flowledger.services.witnessing import name_of

    if not note:
        die("give --note TEXT: what you found out about the refusal (it is recorded)")
    who = operator or getpass.getuser()
    with opened(db) as store:
        try:
            cleared = clear_refusal(ledger_for(store), witness, operator=who, note=note)
        except (IllegalTransition, InvalidInput) as exc:  # a blank or too long note or name
            die(str(exc))
    for w in cleared:
        name = name_of(w.witness)
        typer.echo(f"cleared the refusal by {name} (size {w.refused_size}), recorded for {who}")
