"""The Merkle tree over the events as stored: ``merkle_nodes``, every perfect subtree of two
leaves or more (:mod:`flowledger.domain.merkle`), extended in the transaction of each append,
and read back for roots and proofs at any size the tree has had. A leaf is not stored: it is
the hash of its event's hash, which ``events`` holds (half the rows an append writes).

On SQLite the writer extends it (:func:`extend`, called by
:func:`flowledger.storage.chain.append_events`); on PostgreSQL a statement trigger on
``events`` does (migration 0005), since only the database knows the sequence numbers there.
Either way the events and the subtrees they complete commit together or not at all.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy import Connection

from flowledger.domain import merkle
from flowledger.storage.models import Event, MerkleNode, table
from flowledger.storage.tx import Tx

NODES = table(MerkleNode)
EVENTS = table(Event)
_ROWS_PER_INSERT = 300  # one multi-row INSERT: a row of executemany costs twice as much

# The tree's right edge after a chain head, by that head's hash: the edge is a function of
# the chain, so an entry is right whichever ledger or transaction made it, and one left by a
# rolled-back transaction names a head that never was. Saves the writer a read per append.
_EDGES: OrderedDict[str, list[bytes]] = OrderedDict()
_EDGES_KEPT = 8


class Sealed(Protocol):
    """What :func:`extend` needs of an appended event."""

    @property
    def seq(self) -> int: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...


def extend(tx: Tx, events: Sequence[Sealed]) -> None:
    """Add ``events`` (consecutive, just inserted by ``tx``) to the tree (SQLite)."""
    size = events[0].seq - 1
    edge = _EDGES.pop(events[0].prev_hash, None)
    if edge is None:
        edge = _edge(tx, size)
    made: list[int | bytes] = []
    for ev in events:
        for level, idx, h in merkle.append(edge, size, merkle.event_leaf(ev.hash)):
            if level:
                made += (level, idx, h)
        size += 1
    step = 3 * _ROWS_PER_INSERT
    for start in range(0, len(made), step):
        part = made[start : start + step]
        tx.execute(_insert(len(part) // 3), part)
    _EDGES[events[-1].hash] = edge
    while len(_EDGES) > _EDGES_KEPT:
        _EDGES.popitem(last=False)


@functools.cache
def _insert(rows: int) -> str:
    return "INSERT INTO merkle_nodes (level, idx, hash) VALUES " + ", ".join(["(?, ?, ?)"] * rows)


def _edge(tx: Tx, size: int) -> list[bytes]:
    """The right edge of the tree of ``size`` leaves, read back (the cache did not have it)."""
    wanted = merkle.compact_range(size)
    inner = [node for node in wanted if node[0]]
    found: dict[merkle.Node, bytes] = {}
    if inner:
        where = " OR ".join("(level = ? AND idx = ?)" for _ in inner)
        cur = tx.execute(
            f"SELECT level, idx, hash FROM merkle_nodes WHERE {where}",
            [v for node in inner for v in node],
        )
        found = {(int(level), int(idx)): bytes(h) for level, idx, h in cur.fetchall()}
    if wanted and not wanted[-1][0]:  # an odd size: the last leaf is on the edge
        row = tx.one("SELECT hash FROM events WHERE seq = :seq", {"seq": size})
        assert row is not None
        found[wanted[-1]] = merkle.event_leaf(row.hash)
    return [found[node] for node in wanted]


def nodes(conn: Connection, wanted: Sequence[merkle.Node]) -> dict[merkle.Node, bytes]:
    """The stored hashes of the perfect subtrees ``wanted``; a missing one is a
    :class:`KeyError` naming it (a tree that lacks a subtree its size implies is damaged)."""
    found: dict[merkle.Node, bytes] = {}
    by_level: dict[int, list[int]] = {}
    for level, idx in wanted:
        if level:
            by_level.setdefault(level, []).append(idx)
    if by_level:
        # One IN per level: SQLite reads a row-value IN, ``(level, idx) IN (...)``, by
        # scanning the table (a second and more at a million events; bench/README.md,
        # "Proofs"), and each of these by its primary key.
        rows = conn.execute(
            sa.select(NODES.c.level, NODES.c.idx, NODES.c.hash).where(
                sa.or_(
                    *(
                        sa.and_(NODES.c.level == level, NODES.c.idx.in_(idxs))
                        for level, idxs in by_level.items()
                    )
                )
            )
        ).all()
        found.update({(int(r.level), int(r.idx)): bytes(r.hash) for r in rows})
    leaves = [idx + 1 for level, idx in wanted if not level]
    if leaves:
        hashes = conn.execute(
            sa.select(EVENTS.c.seq, EVENTS.c.hash).where(EVENTS.c.seq.in_(leaves))
        ).all()
        found.update({(0, int(seq) - 1): merkle.event_leaf(h) for seq, h in hashes})
    missing = [n for n in wanted if n not in found]
    if missing:
        level, idx = missing[0]
        raise KeyError(f"the tree lacks its subtree at level {level}, index {idx}")
    return found


def root(conn: Connection, size: int) -> bytes:
    """The root of the tree as it was at ``size`` leaves."""
    wanted = merkle.compact_range(size)
    found = nodes(conn, wanted)
    return merkle.fold([found[n] for n in wanted])


def proof(conn: Connection, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """The hashes of the subtrees ``ranges`` (an inclusion or consistency proof's)."""
    return merkle.hashes_of(ranges, lambda wanted: nodes(conn, wanted))


def beyond(conn: Connection, size: int) -> merkle.Node | None:
    """A stored subtree that reaches past leaf ``size`` (one of a longer chain, whose events
    are gone), or ``None``: subtree ``(level, idx)`` ends within ``size`` leaves exactly when
    ``idx < size >> level``. One indexed read a level."""
    top = conn.execute(sa.select(sa.func.max(NODES.c.level))).scalar()
    for level in range(1, int(top or 0) + 1):
        idx = conn.execute(
            sa.select(NODES.c.idx)
            .where(NODES.c.level == level, NODES.c.idx >= size >> level)
            .order_by(NODES.c.idx)
            .limit(1)
        ).scalar()
        if idx is not None:
            return level, int(idx)
    return None
