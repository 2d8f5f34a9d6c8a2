"""``flowledger verify --anchors FILE``: the chain against every head published to FILE.

The chain walk proves the events link up; a forger who rewrites event N and recomputes every
later hash and the head (or deletes the last events and rolls the head back) leaves a chain
that links up too. A head published before the forgery does not link up with it: its sequence
number is gone (truncation) or holds another hash (rewrite).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from flowledger.domain.anchors import Anchor, AnchorError, parse_line
from flowledger.domain.checkpoints import CheckpointError, origin_of, unverified_checkpoint
from flowledger.domain.display import counted
from flowledger.domain.hashing import GENESIS_HASH
from flowledger.domain.times import for_people
from flowledger.storage import merkle as tree
from flowledger.storage.engine import LedgerError
from flowledger.storage.reads import Connection
from flowledger.storage.reads import event_log as event_rows
from flowledger.storage.reads.meta import identity


@dataclass
class AnchorCheck:
    checked: int = 0
    head_seq: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def read_anchors(path: Path) -> Iterator[tuple[int, Anchor]]:
    """``(line number, anchor)`` for each line of the file, streamed; blank lines are
    skipped. A line that is not an anchor is a :class:`LedgerError` naming the file and line
    (nothing is checked against a file that may have been damaged)."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"cannot read the anchor file {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    yield number, parse_line(text)
                except AnchorError as exc:
                    raise LedgerError(f"{path} line {number}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise LedgerError(f"{path} is not UTF-8 text ({exc.reason})") from None


def check_anchors(conn: Connection, path: Path, *, batch: int = 500) -> AnchorCheck:
    """Every anchor in ``path`` against the events: its sequence number must exist (else the
    chain was cut after it was published) with exactly its hash (else it was rewritten)."""
    result = AnchorCheck()
    result.head_seq = event_rows.last_seq(conn)
    pending: list[tuple[int, Anchor]] = []
    for item in read_anchors(path):
        pending.append(item)
        if len(pending) >= batch:
            _check(conn, pending, result, path)
            pending = []
    _check(conn, pending, result, path)
    if result.checked == 0:
        raise LedgerError(f"{path} holds no anchors; nothing to check the chain against")
    return result


def _check(
    conn: Connection, anchors: list[tuple[int, Anchor]], result: AnchorCheck, path: Path
) -> None:
    if not anchors:
        return
    seqs = sorted({a.seq for _, a in anchors})
    found = event_rows.hashes(conn, seqs)
    found[0] = identity(conn)[1]  # the head of an empty chain
    for number, anchor in anchors:
        if anchor.seq == 0 and anchor.hash == GENESIS_HASH:
            result.checked += 1  # the empty head every ledger had before identities
            continue
        result.checked += 1
        when = for_people(anchor.at)
        where = f"{path.name} line {number}: head seq {anchor.seq} published {when}"
        have = found.get(anchor.seq)
        if have is None and anchor.seq > result.head_seq:
            result.problems.append(
                f"{where} is beyond the chain's end (seq {result.head_seq}): events were removed"
            )
        elif have is None:
            result.problems.append(f"{where}: event {anchor.seq} is missing")
        elif have != anchor.hash:
            result.problems.append(
                f"{where} had hash {anchor.hash}; event {anchor.seq} now has {have}: "
                "the chain was rewritten"
            )
        elif anchor.checkpoint is not None:
            problem = _checkpoint_problem(conn, anchor)
            if problem is not None:
                result.problems.append(f"{where}: {problem}")


def _checkpoint_problem(conn: Connection, anchor: Anchor) -> str | None:
    """What is wrong with an anchor's checkpoint against the tree (its signature is the
    standalone verifier's to check, with the verifier key); ``None`` when nothing is."""
    assert anchor.checkpoint is not None
    try:
        cp = unverified_checkpoint(anchor.checkpoint)
    except CheckpointError as exc:
        return f"its checkpoint is damaged: {exc}"
    mine = origin_of(identity(conn)[0])
    if cp.origin != mine or cp.size != anchor.seq:
        return (
            f"its checkpoint is of {cp.origin} at {counted(cp.size, 'event')}, "
            f"not of {mine} at {anchor.seq}"
        )
    if tree.root(conn, cp.size) != cp.root:
        return "its checkpoint's root is not the tree's at that size: the tree was rewritten"
    return None
