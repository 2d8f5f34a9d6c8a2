"""The event chain read whole: its head, a walk of every event in order, a connection that
sees one moment for all its reads, and the check of the chain end to end (each link, the
recorded head, the Merkle tree over the events, and a head printed earlier)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from flowledger.domain import merkle
from flowledger.domain.chain import event_body, head_prefix
from flowledger.domain.display import counted
from flowledger.domain.hashing import GENESIS_HASH, chain_hash, is_genesis_of
from flowledger.storage import merkle as tree
from flowledger.storage.engine import Store
from flowledger.storage.models import ChainHead, Event, table
from flowledger.storage.reads import Connection
from flowledger.storage.reads.meta import identity

EVENTS = table(Event)
HEAD = table(ChainHead)


def head(conn: Connection) -> tuple[int, str]:
    seq, digest = conn.execute(sa.select(HEAD.c.seq, HEAD.c.hash).where(HEAD.c.id == 1)).one()
    return int(seq), str(digest)


def walk(conn: Connection, batch: int) -> Iterator[Any]:
    """Every event in order, read ``batch`` at a time."""
    after = 0
    while True:
        rows = conn.execute(
            sa.select(EVENTS).where(EVENTS.c.seq > after).order_by(EVENTS.c.seq).limit(batch)
        ).all()
        if not rows:
            return
        yield from rows
        after = rows[-1].seq


@contextmanager
def snapshot(store: Store) -> Iterator[Connection]:
    """A read connection that sees the ledger as of one moment for all its statements, so
    that a check made of many reads (the chain walk and its head, a replay and the tables it
    is compared with) never mistakes a write committed half-way through for a difference.
    SQLite's reader runs in one transaction already (``BEGIN``, a WAL snapshot from its first
    read); PostgreSQL reads each statement afresh under its default READ COMMITTED, so the
    connection asks for REPEATABLE READ (one snapshot per transaction), read only."""
    with store.reader.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        yield conn


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    head_seq: int
    head_hash: str
    bad_seq: int | None = None  # None when the chain is whole but not the head expected
    problem: str | None = None
    expected_seq: int | None = None  # the event whose hash the expected head is (0: none yet)
    ledger_id: str = ""
    tree_ok: bool = True  # False: the events chain, but the Merkle tree does not match them


def verify(conn: Connection, *, expect_head: str | None = None, batch: int = 5000) -> VerifyResult:
    """Walk every event in order: sequence numbers without gaps, each ``prev_hash`` the hash
    before it, each hash recomputed from the row; then the recorded head, and ``expect_head``
    when given: a head printed earlier and kept elsewhere, whole or its first 12 or more hex
    digits (:func:`~flowledger.domain.chain.head_prefix`). It must be the hash of exactly one
    event of the chain: the head, or an earlier one when events were appended since it was
    printed. Not found, events up to it were removed or rewritten (or it is another ledger's).

    The chain starts from the ledger's genesis (its identity's, or the shared all-zeros one of
    a ledger that had events before identities); the Merkle tree is rebuilt from the events as
    they are walked and its root compared with the stored tree's.
    """
    prefix = head_prefix(expect_head) if expect_head is not None else None
    ledger_id, genesis = identity(conn)
    if not is_genesis_of(ledger_id, genesis):
        return _bad(0, 0, genesis, 1, f"the genesis {genesis} is not ledger {ledger_id}'s")
    named = [0] if prefix is not None and genesis.startswith(prefix) else []
    prev, expected_seq, checked = genesis, 1, 0
    last_seq = 0
    edge: list[bytes] = []
    for row in walk(conn, batch):
        if row.seq != expected_seq:
            return _bad(
                checked,
                last_seq,
                prev,
                expected_seq,
                f"event {expected_seq} is missing (next is {row.seq})",
            )
        if row.prev_hash != prev:
            return _bad(checked, last_seq, prev, row.seq, "prev_hash does not match the chain")
        try:
            data = json.loads(row.data)
        except ValueError:
            return _bad(checked, last_seq, prev, row.seq, "data is not valid JSON")
        body = event_body(row.seq, row.at, row.actor, row.kind, row.operation_id, row.hold_id, data)
        if chain_hash(prev, body) != row.hash:
            return _bad(checked, last_seq, prev, row.seq, "content does not match its hash")
        if prefix is not None and row.hash.startswith(prefix):
            named.append(row.seq)
        merkle.append(edge, checked, merkle.event_leaf(row.hash))
        prev, last_seq, expected_seq, checked = row.hash, row.seq, row.seq + 1, checked + 1
    head_seq, head_hash = head(conn)
    if head_seq != last_seq or head_hash != prev:
        return _bad(
            checked,
            last_seq,
            prev,
            last_seq + 1 if head_seq > last_seq else head_seq,
            f"recorded head is {head_seq} but the chain ends at {last_seq}",
        )
    problem = _tree_problem(conn, checked, merkle.fold(edge)) or _past_the_end(conn, checked)
    if problem is not None:
        return VerifyResult(False, checked, last_seq, prev, problem=problem, tree_ok=False)
    if prefix is None:
        return VerifyResult(True, checked, last_seq, prev, ledger_id=ledger_id)
    # Every event checked out: what differs, if anything, is the head, not a link.
    if named == [0] and genesis == GENESIS_HASH:
        return VerifyResult(
            False,
            checked,
            last_seq,
            prev,
            problem=f"{prefix} is the genesis every ledger made before ledger identities "
            "starts from: it tells this ledger from no other; give a head printed since",
        )
    if not named:
        return VerifyResult(
            False,
            checked,
            last_seq,
            prev,
            problem=f"this ledger's head is {prev}, you expected {prefix} "
            "(a different ledger, or events removed or rewritten at the end)",
        )
    if len(named) > 1:
        seqs = ", ".join(str(seq) for seq in named)
        return VerifyResult(
            False,
            checked,
            last_seq,
            prev,
            problem=f"{prefix} begins the hashes of events {seqs}: give more of the hash",
        )
    return VerifyResult(True, checked, last_seq, prev, expected_seq=named[0], ledger_id=ledger_id)


def _tree_problem(conn: Connection, size: int, rebuilt: bytes) -> str | None:
    """What is wrong with the stored tree of ``size`` leaves, whose root the events give as
    ``rebuilt``; ``None`` when nothing is."""
    try:
        stored = tree.root(conn, size)
    except KeyError as exc:
        return f"the Merkle tree does not cover the {counted(size, 'event')}: {exc.args[0]}"
    if stored != rebuilt:
        return (
            f"the Merkle tree's root at {counted(size, 'event')} is {stored.hex()}, "
            f"the events give {rebuilt.hex()}"
        )
    return None


def _past_the_end(conn: Connection, size: int) -> str | None:
    """A stored subtree over leaves the chain does not have: the tree grew past the chain's
    end, so events after it were deleted and the head rolled back (a truncation)."""
    found = tree.beyond(conn, size)
    if found is None:
        return None
    level, idx = found
    return (
        f"the Merkle tree holds a subtree over events {(idx << level) + 1}-"
        f"{(idx + 1) << level}, past the chain's end at {size}: events after it were "
        "removed and the head rolled back"
    )


def _bad(checked: int, head_seq: int, head_hash: str, seq: int, problem: str) -> VerifyResult:
    return VerifyResult(False, checked, head_seq, head_hash, bad_seq=seq, problem=problem)


def chain_head(store: Store) -> tuple[int, str]:
    with store.reader.connect() as conn:
        return head(conn)


def identity_of(store: Store) -> tuple[str, str]:
    """The ledger's id (made at ``init``, or by the migration that brought identities) and
    the hash its chain starts from."""
    with store.reader.connect() as conn:
        return identity(conn)


def ledger_identity(store: Store) -> str:
    return identity_of(store)[0]
