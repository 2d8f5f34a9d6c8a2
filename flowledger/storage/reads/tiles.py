"""Tiles read from the stored tree (:mod:`flowledger.domain.tiles`): a level-0 tile's hashes
are its events' leaves, a higher tile's are the stored perfect subtrees at its height, and an
entry bundle holds the leaves' inputs (the events' chain hashes). A tile is read only when the
tree has all of it: its hashes never change after that."""

from __future__ import annotations

import sqlalchemy as sa

from flowledger.domain import merkle
from flowledger.domain.tiles import WIDTH, Tile, entry_bundle
from flowledger.storage.models import Event, MerkleNode, table
from flowledger.storage.reads import Connection

EVENTS = table(Event)
NODES = table(MerkleNode)


def has(size: int, tile: Tile) -> bool:
    """Whether the tree of ``size`` leaves has every hash of ``tile``: the first ``width``
    hashes of a tile never change, so a partial tile narrower than the tree's is still
    right (a reader holding an older checkpoint asks for it)."""
    return (size >> tile.height) >= tile.index * WIDTH + tile.width


def leaf_inputs(conn: Connection, first: int, count: int) -> list[bytes]:
    """The inputs of leaves ``first..first+count-1``: their events' chain hashes, as bytes."""
    rows = conn.execute(
        sa.select(EVENTS.c.hash)
        .where(EVENTS.c.seq.between(first + 1, first + count))
        .order_by(EVENTS.c.seq)
    ).scalars()
    found = [bytes.fromhex(h) for h in rows]
    if len(found) != count:
        raise KeyError(f"the log lacks events among {first + 1}-{first + count}")
    return found


def tile_bytes(conn: Connection, tile: Tile) -> bytes:
    """The bytes of ``tile`` (which the caller knows the tree has, :func:`has`)."""
    first = tile.index * WIDTH
    if tile.level is None:
        return entry_bundle(leaf_inputs(conn, first, tile.width))
    if tile.level == 0:
        return b"".join(merkle.leaf_hash(h) for h in leaf_inputs(conn, first, tile.width))
    rows = conn.execute(
        sa.select(NODES.c.hash)
        .where(
            NODES.c.level == tile.height,
            NODES.c.idx.between(first, first + tile.width - 1),
        )
        .order_by(NODES.c.idx)
    ).scalars()
    hashes = [bytes(h) for h in rows]
    if len(hashes) != tile.width:
        raise KeyError(f"the tree lacks subtrees of {tile.path()}")
    return b"".join(hashes)
