"""Checkpoints and proofs from the stored tree: the current tree head signed, an operation's
events with their inclusion proofs, and the proof that one checkpoint extends another. All
read in one snapshot, each in O(log n) stored hashes (``bench/README.md``, "Proofs")."""

from __future__ import annotations

import json
from typing import Any

from flowledger.domain import merkle
from flowledger.domain.chain import event_time
from flowledger.domain.checkpoints import (
    Checkpoint,
    CheckpointError,
    Signer,
    origin_of,
    unverified_checkpoint,
)
from flowledger.domain.display import counted
from flowledger.domain.proofs import (
    b64,
    consistency_document,
    inclusion_document,
    range_document,
)
from flowledger.domain.tiles import Tile
from flowledger.storage import merkle as tree
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.problems import Missing
from flowledger.storage.reads import Connection, tiles
from flowledger.storage.reads import event_log as event_rows
from flowledger.storage.reads.chain import head, snapshot
from flowledger.storage.reads.meta import identity

MAX_EVENTS = 100_000  # of one operation in one proof


def origin(conn: Connection) -> str:
    return origin_of(identity(conn)[0])


def ledger_origin(store: Store) -> str:
    with store.reader.connect() as conn:
        return origin(conn)


def tree_head(conn: Connection) -> Checkpoint:
    """The tree as it stands: the ledger's origin, its size (the chain's length), its root."""
    size = head(conn)[0]
    return Checkpoint(origin(conn), size, tree.root(conn, size))


def signed_checkpoint(store: Store, signer: Signer) -> str:
    """The current tree head as a signed note."""
    with snapshot(store) as conn:
        return signer.sign(tree_head(conn).text())


def _ours(conn: Connection, note: str, what: str) -> Checkpoint:
    """The checkpoint ``note`` carries, once it is this ledger's at a size it has had, with the
    root its tree had then."""
    try:
        cp = unverified_checkpoint(note)
    except CheckpointError as exc:
        raise LedgerError(f"{what}: {exc}") from None
    mine = origin(conn)
    if cp.origin != mine:
        raise LedgerError(f"{what} is of {cp.origin}, not of this ledger ({mine})")
    size = head(conn)[0]
    if cp.size > size:
        raise LedgerError(
            f"{what} has {counted(cp.size, 'event')}, this ledger {size}: events were removed since"
        )
    if tree.root(conn, cp.size) != cp.root:
        raise LedgerError(
            f"this ledger's tree at {counted(cp.size, 'event')} is not {what}'s: the log was "
            "rewritten or forked since it was signed"
        )
    return cp


def operation_proof(store: Store, operation_id: str, note: str) -> dict[str, Any]:
    """The proof file of ``operation_id``: its events up to the checkpoint ``note`` (signed,
    of this ledger), each with its inclusion proof."""
    with snapshot(store) as conn:
        cp = _ours(conn, note, "the checkpoint")
        rows = event_rows.of_operation(conn, operation_id, limit=MAX_EVENTS)
        events = [_event(conn, row, cp.size) for row in rows if row.seq <= cp.size]
    if not events:
        raise Missing(
            f"no events of operation {operation_id!r} "
            f"in the checkpoint's {counted(cp.size, 'event')}"
        )
    return inclusion_document(note, operation_id, events)


def event_range(text: str) -> tuple[int, int]:
    """``N`` or ``FIRST-LAST`` (event numbers, from 1) as a person gives them; a
    :class:`LedgerError` says what is wrong. At most :data:`MAX_EVENTS` events."""
    first, sep, last = text.strip().partition("-")
    bounds = (first, last if sep else first)
    # ASCII digits only: ``int`` reads other scripts' digits too.
    if not all(b.isascii() and b.isdigit() and len(b) <= 19 for b in bounds):
        raise LedgerError(f"{text!r} is not an event number N or a range FIRST-LAST (from 1)")
    low, high = int(bounds[0]), int(bounds[1])
    if not 1 <= low <= high:
        raise LedgerError(f"{text!r}: events are numbered from 1, and FIRST must not pass LAST")
    if high - low >= MAX_EVENTS:
        raise LedgerError(f"{text!r}: at most {MAX_EVENTS} events in one proof")
    return low, high


def range_proof(store: Store, first: int, last: int, note: str) -> dict[str, Any]:
    """The proof file of events ``first..last`` (whatever they concern) against the
    checkpoint ``note``, each with its inclusion proof."""
    with snapshot(store) as conn:
        cp = _ours(conn, note, "the checkpoint")
        if last > cp.size:
            raise Missing(
                f"events {first}-{last} are not all in the checkpoint's {counted(cp.size, 'event')}"
            )
        events = [_event(conn, row, cp.size) for row in event_rows.between(conn, first, last)]
    if len(events) != last - first + 1:  # a hole in the chain: verify names it
        raise LedgerError(f"events {first}-{last} are not all stored: run `flowledger verify`")
    return range_document(note, first, last, events)


def _event(conn: Connection, row: Any, size: int) -> dict[str, Any]:
    path = tree.proof(conn, merkle.inclusion_ranges(row.seq - 1, size))
    return {
        "seq": row.seq,
        "at": event_time(row.at),
        "actor": row.actor,
        "kind": row.kind,
        "operation_id": row.operation_id,
        "hold_id": row.hold_id,
        "data": json.loads(row.data),
        "prev_hash": row.prev_hash,
        "hash": row.hash,
        "inclusion": b64(path),
    }


def consistency_proof(store: Store, old_note: str, new_note: str) -> dict[str, Any]:
    """The proof file that checkpoint ``old_note`` is a prefix of ``new_note``."""
    with snapshot(store) as conn:
        old = _ours(conn, old_note, "the old checkpoint")
        new = _ours(conn, new_note, "the new checkpoint")
        if old.size > new.size:
            raise LedgerError(
                f"the old checkpoint has {old.size} events, the new {new.size}: give the "
                "older one first"
            )
        path = tree.proof(conn, merkle.consistency_ranges(old.size, new.size)) if old.size else []
    return consistency_document(old_note, new_note, path)


def consistency_hashes(store: Store, old: int, new: int) -> list[bytes]:
    """The RFC 9162 consistency proof from this ledger's tree at ``old`` leaves to ``new``
    (empty from 0 or between equal sizes)."""
    if old == 0 or old == new:
        return []
    with snapshot(store) as conn:
        return tree.proof(conn, merkle.consistency_ranges(old, new))


def size_consistency(store: Store, old: int, new: int) -> dict[str, Any]:
    """The RFC 9162 proof that the tree of ``old`` leaves is a prefix of the tree of ``new``,
    both sizes the tree has had, with the two roots (unsigned: a reader compares them with
    checkpoints it holds)."""
    with snapshot(store) as conn:
        size = head(conn)[0]
        if not 0 <= old <= new <= size:
            raise Missing(
                f"no consistency proof from {old} to {new} events: sizes run from 0 to the "
                f"log's {size}, the old first"
            )
        path = tree.proof(conn, merkle.consistency_ranges(old, new)) if 0 < old < new else []
        roots = [tree.root(conn, old), tree.root(conn, new)]
    return {
        "old_size": old,
        "new_size": new,
        "old_root": b64(roots[:1])[0],
        "new_root": b64(roots[1:])[0],
        "consistency": b64(path),
    }


def tile(store: Store, which: Tile) -> bytes | None:
    """The bytes of tile ``which``, or ``None`` while the tree has not all of it."""
    with snapshot(store) as conn:
        if not tiles.has(head(conn)[0], which):
            return None
        return tiles.tile_bytes(conn, which)
