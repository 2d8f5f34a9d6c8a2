"""What an auditor takes away: ``key create``, ``checkpoint`` and ``proof``."""

from __future__ import annotations

import json
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
    file_settings,
    one_line_errors,
    opened,
)
from flowledger.domain.display import counted
from flowledger.storage.problems import LedgerError, Missing

if TYPE_CHECKING:
    from flowledger.domain.checkpoints import Signer
    from flowledger.storage.engine import Store

key_app = typer.Typer(
    cls=Group,
    help="The Ed25519 key that signs checkpoints.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(key_app, name="key")

OutOption = Annotated[
    Path | None,
    typer.Option("--out", metavar="FILE", help="Write to FILE instead of standard output"),
]


@key_app.command("create", cls=Command)
@one_line_errors
def key_create(
    path: Annotated[
        Path, typer.Argument(metavar="PATH", help="The key file to create (owner-only, 0600)")
    ],
    db: DbOption = None,
) -> None:
    """Make a signing key named for this ledger, and its verifier key beside it (PATH.pub)."""
    from flowledger.services.signing import create_key, public_path
    from flowledger.storage.reads import tree_proofs as proofs

    path = path.expanduser().absolute()
    with opened(db) as store:
        signer = create_key(path, proofs.ledger_origin(store))
    typer.echo(f"created signing key {path} (owner only) for {signer.name}")
    typer.echo(f"verifier key (also in {public_path(path)}), for whoever checks the proofs:")
    typer.echo(f"  {signer.verifier.text()}")
    typer.echo(f'sign with it: in flowledger.toml, [checkpoints] key = "{path}"')


def _signer(store: Store) -> Signer:
    from flowledger.services.signing import configured_signer
    from flowledger.storage.reads import tree_proofs as proofs

    signer = configured_signer(file_settings().checkpoints, proofs.ledger_origin(store))
    if signer is None:
        raise LedgerError(
            "no signing key: run `flowledger key create PATH` and set [checkpoints] key = PATH "
            "in flowledger.toml"
        )
    return signer


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"cannot write {out}: {exc.strerror}") from None
    typer.echo(f"wrote {out}", err=True)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read {what} {path}: {exc}") from None


def _new_checkpoint(store: Store, least: int | None = None) -> tuple[str, bool]:
    """A checkpoint of the tree as it stands, signed; with [[witnesses]] configured, sent to
    them and returned with the cosignatures they answered (each answer said on stderr).
    Whether it is short of a witness: refused (``least`` None) or, for proving events up to
    ``least``, lacking a witness's cosignature when no checkpoint they all cosigned covers
    them (then said on stderr); one that does is returned instead."""
    from flowledger.scheduled.witnesses import Witnesses
    from flowledger.storage.reads import tree_proofs as proofs
    from flowledger.storage.reads.witnesses import latest_cosigned

    cfg = file_settings()
    if not cfg.witnesses:
        return proofs.signed_checkpoint(store, _signer(store)), False
    witnesses = Witnesses(store, _signer(store), cfg.witnesses, cfg.alerts.urls)
    try:
        done = witnesses.checkpoint()
    finally:
        witnesses.close()
    for answer in done.answers:
        typer.echo(answer.line(), err=True)
    if least is None:
        return done.note, any(a.outcome == "refused" for a in done.answers)
    missing = witnesses.missing(done.note)  # verifies each cosignature: only for a proof
    if not missing:
        return done.note, False
    older = latest_cosigned(store, least, [w.vkey for w in cfg.witnesses])
    if older is not None:
        from flowledger.domain.checkpoints import unverified_checkpoint  # cryptography: lazily

        size = unverified_checkpoint(older).size
        typer.echo(
            f"using the latest checkpoint the witnesses cosigned ({counted(size, 'event')}, "
            f"every event asked for): the new one of {done.size} lacks {', '.join(missing)}'s "
            "cosignature",
            err=True,
        )
        return older, False
    typer.echo(
        f"the checkpoint of {counted(done.size, 'event')} lacks the witnesses' cosignatures "
        f"({', '.join(missing)}) and none they cosigned holds every event asked for: a "
        "verifier requiring them refuses it",
        err=True,
    )
    return done.note, True


def _covering(store: Store, operation_ids: list[str], span: tuple[int, int] | None) -> int:
    """The size a checkpoint needs to prove ``operation_ids``' events (or ``span``), once
    each is found in the log: a :class:`Missing` says which is not."""
    from flowledger.storage.reads import event_log
    from flowledger.storage.reads.chain import head, snapshot
    from flowledger.storage.reads.tree_proofs import MAX_EVENTS

    with snapshot(store) as conn:
        size = head(conn)[0]
        if span is not None:
            if span[1] > size:
                first, last = span
                asked = (
                    f"event {last} is not"
                    if first == last
                    else f"events {first}-{last} are not all"
                )
                raise Missing(f"{asked} in the log's {counted(size, 'event')}")
            return span[1]
        least = 0
        for op in operation_ids:
            rows = event_log.of_operation(conn, op, limit=MAX_EVENTS)
            if not rows:
                raise Missing(f"no events of operation {op!r} in the log")
            least = max(least, rows[-1].seq)
        return least


@app.command()
@one_line_errors
def checkpoint(db: DbOption = None, out: OutOption = None) -> None:
    """Sign the Merkle tree's head: a C2SP checkpoint (the ledger's identity, the number of
    events, the root hash) in a signed note. With [[witnesses]] configured, each gets it with
    the proof from the size it last cosigned, and the note is printed with the cosignatures
    they answered (each witness's answer on stderr); exit 1 when a witness refused it."""
    with opened(db) as store:
        note, refused = _new_checkpoint(store)
    _emit(note, out)
    if refused:
        raise typer.Exit(FAILED)


@app.command(cls=Command)
@one_line_errors
def proof(
    operation_id: Annotated[
        str | None,
        typer.Argument(metavar="OPERATION_ID", help="The operation whose events to prove"),
    ] = None,
    db: DbOption = None,
    against: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            metavar="FILE",
            help="Prove against this checkpoint [default: a new one, signed now, and "
            "cosigned by the [[witnesses]] when there are]",
        ),
    ] = None,
    events: Annotated[
        str | None,
        typer.Option(
            "--events",
            metavar="N|FIRST-LAST",
            help="Prove events by their number in the log (a token's creation, event 1…)",
        ),
    ] = None,
    consistency: Annotated[
        tuple[Path, Path] | None,
        typer.Option(
            metavar="OLD NEW", help="Prove that checkpoint file NEW extends checkpoint file OLD"
        ),
    ] = None,
    out: OutOption = None,
) -> None:
    """An operation's events (or, with --events, events by their number) with their
    inclusion proofs against a checkpoint, or (with --consistency) the proof that one
    checkpoint extends another, as a JSON file that
    `python -m flowledger.programs.verify_proof FILE --key PUB` checks without the database."""
    from flowledger.storage.reads import tree_proofs as proofs

    if [operation_id, events, consistency].count(None) != 2:
        die("give one of OPERATION_ID, --events N|FIRST-LAST or --consistency OLD NEW")
    span = proofs.event_range(events) if events is not None else None
    with opened(db) as store:
        if consistency is not None:
            old, new = (_read(p, "the checkpoint") for p in consistency)
            doc = proofs.consistency_proof(store, old, new)
        else:
            short = False
            if against is not None:
                note = _read(against, "the checkpoint")
            else:
                least = _covering(store, [operation_id] if operation_id else [], span)
                note, short = _new_checkpoint(store, least)
            if span is not None:
                doc = proofs.range_proof(store, *span, note)
            else:
                assert operation_id is not None
                doc = proofs.operation_proof(store, operation_id, note)
    # ASCII, as every JSON the ledger prints: a stored value's control, bidi or invisible
    # characters as JSON escapes, the same values for the verifier.
    _emit(json.dumps(doc, indent=2) + "\n", out)
    if consistency is None and short:
        raise typer.Exit(FAILED)


@app.command(cls=Command)
@one_line_errors
def tiles(
    folder: Annotated[
        Path,
        typer.Argument(metavar="DIR", help="The tiles directory to write or bring up to date"),
    ],
    db: DbOption = None,
) -> None:
    """The log as a C2SP tlog-tiles directory (checkpoint, tile/L/N, tile/entries/N) that any
    web server can publish; run again, it writes only what the log gained since."""
    from flowledger.reports.tiles import write_tiles

    with opened(db) as store:
        done = write_tiles(store, _signer(store), folder.expanduser())
    typer.echo(
        f"{folder}: {done.size} events (was {done.old_size}), {done.tiles} tile files written"
    )


@app.command(cls=Command)
@one_line_errors
def bundle(
    operation_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="OPERATION_ID...", help="The operations whose events to bundle"),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="DIR", help="The folder to write (new or empty)"),
    ] = None,
    events: Annotated[
        str | None,
        typer.Option(
            "--events", metavar="N|FIRST-LAST", help="Bundle events by their number instead"
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """An auditor's bundle: the operations' events (or events by number) as exact bytes, each
    with a C2SP tlog-proof, the signed checkpoint (sent to the [[witnesses]] first, and kept
    with their cosignatures and vkeys), the log's key, a single-file verifier and a README,
    checkable with Python and `cryptography` alone; exit 1 when a witness refused it."""
    from flowledger.reports.bundle import write_bundle
    from flowledger.storage.reads import tree_proofs as proofs

    if out is None:
        die("give --out DIR: the folder the bundle goes into")
        return
    if bool(operation_ids) == (events is not None):
        die("give OPERATION_ID... or --events N|FIRST-LAST (one of the two)")
    span = proofs.event_range(events) if events is not None else None
    folder = out.expanduser()
    if folder.exists() and not folder.is_dir():
        die(f"--out {out}: not a folder (a bundle goes into a folder of its own)")
    if folder.is_dir() and any(folder.iterdir()):
        die(f"--out {out}: not empty (a bundle goes into a folder of its own)")
    witnesses = [w.vkey for w in file_settings().witnesses]
    with opened(db) as store:
        signer = _signer(store)
        note, short = _new_checkpoint(store, _covering(store, operation_ids or [], span))
        done = write_bundle(store, signer, folder, operation_ids or [], span, note, witnesses)
    wrote = (
        f"wrote {out}: {counted(done.events, 'event')} against a checkpoint of "
        f"{counted(done.size, 'event')}"
    )
    if short:
        typer.echo(f"{wrote}, without the witnesses' cosignatures", err=True)
        raise typer.Exit(FAILED)
    typer.echo(f"{wrote}; check it with: python3 {out / 'verify_bundle.py'} {out}")
