"""``flowledger bundle``: what an auditor takes away about some operations (or a range of
events), checkable on their own machine with one file of Python and ``cryptography``.

The folder holds ``checkpoint`` (the signed tree head the proofs lead to, from
:func:`bundle_checkpoint`), ``log.vkey`` (the key that signed it), ``bundle.json`` (what the
bundle is about), ``events/<N>.json`` (each event's exact bytes, as its chain hash covers them)
with ``events/<N>.tlog-proof`` (a C2SP ``tlog-proof``: the previous event's hash as its
``extra``, the leaf's index, its inclusion path, the checkpoint), ``verify_bundle.py`` and a
``README.md`` that starts from the question the auditor is asked. The format is
``docs/log-format.md``'s.
"""

from __future__ import annotations

import base64
import json
import os
import string
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from flowledger.domain import merkle
from flowledger.domain.chain import event_body
from flowledger.domain.checkpoints import Signer, unverified_checkpoint
from flowledger.domain.display import counted
from flowledger.domain.hashing import canonical_json
from flowledger.storage import merkle as tree
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.problems import Missing
from flowledger.storage.reads import Connection
from flowledger.storage.reads import event_log as event_rows
from flowledger.storage.reads.chain import snapshot
from flowledger.storage.reads.tree_proofs import MAX_EVENTS, signed_checkpoint
from flowledger.storage.reads.witnesses import with_cosignatures

FORMAT = "flowledger-bundle/1"
PROOF_HEADER = "c2sp.org/tlog-proof@v1"
MAX_OPERATIONS = 1000


@dataclass(frozen=True)
class BundleWritten:
    size: int  # the checkpoint's tree size
    events: int
    operations: tuple[str, ...]


def bundle_checkpoint(store: Store, signer: Signer) -> str:
    """The signed note every proof of a bundle leads to when none is given: the tree's head,
    signed now, with the cosignatures the witnesses gave the same checkpoint, if they have."""
    return with_cosignatures(store, signed_checkpoint(store, signer))


def write_bundle(
    store: Store,
    signer: Signer,
    folder: Path,
    operations: list[str],
    span: tuple[int, int] | None = None,
    note: str | None = None,
    witnesses: Sequence[str] = (),
) -> BundleWritten:
    """A bundle of ``operations``' events (or of events ``span``) in ``folder``, which must
    not exist or be empty: proven against ``note`` (a checkpoint signed by ``signer``, with the
    cosignatures its witnesses gave) or, without one, :func:`bundle_checkpoint`'s; the
    ``witnesses``' vkeys go in ``witnesses.vkeys`` for the verifier's ``--quorum``."""
    if not operations and span is None:
        raise LedgerError("give the operations to bundle, or a range of events")
    if len(operations) > MAX_OPERATIONS:
        raise LedgerError(f"at most {MAX_OPERATIONS} operations in one bundle")
    wanted = list(dict.fromkeys(operations))
    if note is None:
        note = bundle_checkpoint(store, signer)
    cp = unverified_checkpoint(note)
    with snapshot(store) as conn:
        rows = _rows(conn, wanted, span, cp.size)
        files = {f"events/{row.seq}.json": _sealed(row) for row in rows} | {
            f"events/{row.seq}.tlog-proof": _proof(conn, row, cp.size, note) for row in rows
        }
    _empty_folder(folder)  # made once the events are found: a refusal leaves no folder
    claims = {
        "format": FORMAT,
        "origin": cp.origin,
        "size": cp.size,
        "operations": wanted,
        "range": list(span) if span is not None else None,
        "events": [row.seq for row in rows],
    }
    files["bundle.json"] = (json.dumps(claims, indent=2) + "\n").encode()
    files["checkpoint"] = note.encode()
    files["log.vkey"] = (signer.verifier.text() + "\n").encode()
    if witnesses:
        files["witnesses.vkeys"] = "".join(f"{vkey}\n" for vkey in witnesses).encode()
    here = resources.files("flowledger.reports.bundle_files")
    files["verify_bundle.py"] = here.joinpath("verify_bundle.py").read_bytes()
    readme = string.Template(here.joinpath("README.md").read_text(encoding="utf-8"))
    files["README.md"] = readme.substitute(
        origin=cp.origin,
        size=cp.size,
        events=counted(len(rows), "event"),
        about=_about(wanted, span),
    ).encode()
    for name, data in files.items():
        _write(folder / name, data)
    return BundleWritten(cp.size, len(rows), tuple(wanted))


def _about(operations: list[str], span: tuple[int, int] | None) -> str:
    if span is not None:
        return f"events {span[0]} to {span[1]} of the log"
    # As JSON strings: an id's backticks, newlines or bidi characters cannot restyle the page.
    return (
        "operation"
        + ("s " if len(operations) > 1 else " ")
        + ", ".join(f"`{json.dumps(op)}`" for op in operations)
    )


def _rows(
    conn: Connection, operations: list[str], span: tuple[int, int] | None, size: int
) -> list[Any]:
    if span is not None:
        first, last = span
        if last > size:
            raise Missing(
                f"events {first}-{last} are not all in the log's {counted(size, 'event')}"
            )
        rows = event_rows.between(conn, first, last)
        if len(rows) != last - first + 1:
            raise LedgerError(f"events {first}-{last} are not all stored: run `flowledger verify`")
        return rows
    found: dict[int, Any] = {}
    for op in operations:
        mine = [r for r in event_rows.of_operation(conn, op, limit=MAX_EVENTS) if r.seq <= size]
        if not mine:
            raise Missing(f"no events of operation {op!r} in the log's {counted(size, 'event')}")
        found.update((r.seq, r) for r in mine)
    return [found[seq] for seq in sorted(found)]


def _sealed(row: Any) -> bytes:
    """The event's bytes exactly as its chain hash covers them."""
    data = json.loads(row.data)
    body = event_body(row.seq, row.at, row.actor, row.kind, row.operation_id, row.hold_id, data)
    return canonical_json(body)


def _proof(conn: Connection, row: Any, size: int, note: str) -> bytes:
    """The event's C2SP tlog-proof against ``note``: the previous hash as its extra data (what
    rebuilding the leaf's input needs besides the event), its index, its path."""
    path = tree.proof(conn, merkle.inclusion_ranges(row.seq - 1, size))
    lines = [
        PROOF_HEADER,
        "extra " + base64.b64encode(bytes.fromhex(row.prev_hash)).decode(),
        f"index {row.seq - 1}",
        *(base64.b64encode(h).decode() for h in path),
    ]
    return ("\n".join(lines) + "\n\n" + note).encode()


def _empty_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if any(folder.iterdir()):
            raise LedgerError(f"{folder} is not empty: a bundle goes into a folder of its own")
    except OSError as exc:
        raise LedgerError(f"cannot use {folder} for the bundle: {exc.strerror}") from None


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise LedgerError(f"cannot write {path}: {exc.strerror}") from None
