"""``flowledger tiles DIR``: the log as a C2SP ``tlog-tiles`` directory (``checkpoint``,
``tile/L/N[.p/W]``, ``tile/entries/N[.p/W]``) that any web server can publish as static files.

A run writes only what the tree gained since the checkpoint already in the directory (a full
tile never changes, so it is never written twice), and the checkpoint last: a crash leaves the
old checkpoint, and every tile it needs, in place. The directory's checkpoint must be of this
ledger and agree with its tree, or nothing is written: a directory of another log, or of this
log before a rewrite, is not grown over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from flowledger.domain.checkpoints import CheckpointError, Signer, unverified_checkpoint
from flowledger.domain.display import counted
from flowledger.domain.tiles import Tile, tiles_between
from flowledger.plumbing.faults import crashpoint
from flowledger.storage import merkle as tree
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.reads import Connection
from flowledger.storage.reads import tiles as stored
from flowledger.storage.reads.chain import snapshot
from flowledger.storage.reads.tree_proofs import tree_head
from flowledger.storage.reads.witnesses import with_cosignatures

CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class TilesWritten:
    old_size: int  # the directory's checkpoint before (0: none)
    size: int
    tiles: int  # tile and entry-bundle files written


def write_tiles(store: Store, signer: Signer, folder: Path) -> TilesWritten:
    """Bring ``folder`` up to the ledger's current tree, signed by ``signer`` (with the
    cosignatures the witnesses gave the same checkpoint, when they have)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"cannot create {folder}: {exc.strerror}") from None
    with snapshot(store) as conn:
        old = _published_size(conn, folder)
        head = tree_head(conn)
        if head.size < old:
            raise LedgerError(
                f"{folder}'s checkpoint has {counted(old, 'event')}, the ledger "
                f"{head.size}: events were removed since it was published"
            )
        written = 0
        inputs: dict[int, bytes] = {}
        for tile in tiles_between(old, head.size):
            _write(folder / tile.path(), _bytes(conn, tile, inputs))
            written += 1
            crashpoint("tiles_tile_written")
    # Every tile on disk before the checkpoint that needs them: one sync of the file systems
    # costs what a few files' fsyncs do, thousands of which were most of an export's time
    # (bench/README.md, "Tiles").
    os.sync()
    crashpoint("tiles_before_checkpoint")
    note = with_cosignatures(store, signer.sign(head.text()))
    _write(folder / CHECKPOINT, note.encode(), durable=True)
    return TilesWritten(old, head.size, written)


def _bytes(conn: Connection, tile: Tile, inputs: dict[int, bytes]) -> bytes:
    """A tile's bytes; an entry bundle follows its level-0 tile, which read the same events
    (kept for it in ``inputs``)."""
    if tile.level is None and tile.index in inputs:
        return inputs.pop(tile.index)
    data = stored.tile_bytes(conn, tile)
    if tile.level == 0:
        inputs.clear()
        inputs[tile.index] = stored.tile_bytes(conn, Tile(None, tile.index, tile.width))
    return data


def _published_size(conn: Connection, folder: Path) -> int:
    """The size of the checkpoint ``folder`` holds (0: none), once it is this ledger's and its
    root is the tree's at that size."""
    path = folder / CHECKPOINT
    try:
        note = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read {path}: {exc}") from None
    try:
        cp = unverified_checkpoint(note)
    except CheckpointError as exc:
        raise LedgerError(f"{path}: {exc}") from None
    mine = tree_head(conn)
    if cp.origin != mine.origin:
        raise LedgerError(f"{path} is of {cp.origin}, not of this ledger ({mine.origin})")
    if cp.size > mine.size:
        return cp.size  # write_tiles names the removal
    if tree.root(conn, cp.size) != cp.root:
        raise LedgerError(
            f"{path} does not match this ledger's tree at {counted(cp.size, 'event')}: the "
            "log was rewritten or forked since it was published"
        )
    return cp.size


def _write(path: Path, data: bytes, *, durable: bool = False) -> None:
    """``data`` in ``path`` whole or not at all (a temporary file renamed), synced to disk
    before the rename when ``durable``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if durable:
            fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as exc:
        raise LedgerError(f"cannot write {path}: {exc.strerror}") from None
