"""Verifying the event chain end to end, and reading its head."""

from __future__ import annotations

import json
from dataclasses import dataclass

from flowledger.domain.chain import event_body, head_prefix
from flowledger.domain.hashing import GENESIS_HASH, chain_hash
from flowledger.storage.engine import Store
from flowledger.storage.views import Connection
from flowledger.storage.views.chain import head, snapshot, walk

__all__ = ["VerifyResult", "chain_head", "head", "snapshot", "verify"]


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    checked: int
    head_seq: int
    head_hash: str
    bad_seq: int | None = None  # None when the chain is whole but not the head expected
    problem: str | None = None
    expected_seq: int | None = None  # the event whose hash the expected head is (0: none yet)


def verify(conn: Connection, *, expect_head: str | None = None, batch: int = 5000) -> VerifyResult:
    """Walk every event in order: sequence numbers without gaps, each ``prev_hash`` the hash
    before it, each hash recomputed from the row; then the recorded head, and ``expect_head``
    when given: a head printed earlier and kept elsewhere, whole or its first 12 or more hex
    digits (:func:`~flowledger.domain.chain.head_prefix`). It must be the hash of exactly one
    event of the chain: the head, or an earlier one when events were appended since it was
    printed. Not found, events up to it were removed or rewritten (or it is another ledger's).
    """
    prefix = head_prefix(expect_head) if expect_head is not None else None
    named = [0] if prefix is not None and GENESIS_HASH.startswith(prefix) else []
    prev, expected_seq, checked = GENESIS_HASH, 1, 0
    last_seq = 0
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
    if prefix is None:
        return VerifyResult(True, checked, last_seq, prev)
    # Every event checked out: what differs, if anything, is the head, not a link.
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
    return VerifyResult(True, checked, last_seq, prev, expected_seq=named[0])


def _bad(checked: int, head_seq: int, head_hash: str, seq: int, problem: str) -> VerifyResult:
    return VerifyResult(False, checked, head_seq, head_hash, bad_seq=seq, problem=problem)


def chain_head(store: Store) -> tuple[int, str]:
    with store.reader.connect() as conn:
        return head(conn)
