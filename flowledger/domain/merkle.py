"""The Merkle tree over the events, as RFC 9162 (Certificate Transparency 2.0) defines it: pure
functions on hashes, no I/O, the standard library only (the standalone proof verifier imports
this module).

Leaf ``i`` is the hash of event ``i + 1`` of the chain: ``SHA-256(0x00 || event hash)``, so a
leaf commits to the event and, through its chain hash, to every event before it. A node is
``SHA-256(0x01 || left || right)``. The tree of ``n`` leaves splits at the largest power of two
below ``n`` (RFC 9162 section 2.1.1).

Storage keeps every *perfect* subtree the appends have completed, named ``(level, index)``:
the ``2**level`` leaves from ``index * 2**level``. Any subtree a proof needs is a run of those
(:func:`cover`), so a root or a proof at any past size costs O(log n) stored hashes, and an
append costs the leaf and the perfect subtrees it completes (:func:`append`, two on average).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

Node = tuple[int, int]  # (level, index): the perfect subtree of leaves index*2**level ...


class ProofError(ValueError):
    """A proof that does not check out; the message says what does not match."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def event_leaf(event_hash: str) -> bytes:
    """The leaf of an event: its chain hash (hex) as the leaf's data."""
    return leaf_hash(bytes.fromhex(event_hash))


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


EMPTY_ROOT = hashlib.sha256(b"").digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaves: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes, straight from the RFC's recursive definition (the reference the
    incremental forms are tested against)."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(root_of(leaves[:k]), root_of(leaves[k:]))


# -- the incremental tree: its right edge, and what an append adds ----------------------------


def compact_range(size: int) -> list[Node]:
    """The perfect subtrees that make up the tree of ``size`` leaves, left to right (one per
    set bit of ``size``): what an append needs, and what the root is folded from."""
    nodes: list[Node] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            nodes.append((level, start >> level))
            start += 1 << level
    return nodes


def fold(hashes: Sequence[bytes]) -> bytes:
    """The hash of a run of perfect subtrees, biggest first: each joins the rest on its right
    (how RFC 9162's split shapes any subtree)."""
    if not hashes:
        return EMPTY_ROOT
    acc = hashes[-1]
    for h in reversed(hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def append(edge: list[bytes], size: int, leaf: bytes) -> list[tuple[int, int, bytes]]:
    """Add ``leaf`` as leaf number ``size`` to the tree whose :func:`compact_range` hashes are
    ``edge`` (changed in place); the perfect subtrees it completes, the leaf first, as
    ``(level, index, hash)``."""
    made = [(0, size, leaf)]
    h, level, index = leaf, 0, size
    while index & 1:
        h = node_hash(edge.pop(), h)
        level, index = level + 1, index >> 1
        made.append((level, index, h))
    edge.append(h)
    return made


# -- proofs as runs of stored subtrees ---------------------------------------------------------


def cover(start: int, end: int) -> list[Node]:
    """The perfect subtrees, biggest first, whose :func:`fold` is the hash of leaves
    ``start..end-1``, for any subtree RFC 9162's split makes (``start`` a multiple of the
    largest power of two not above ``end - start``)."""
    nodes: list[Node] = []
    while start < end:
        level = (end - start).bit_length() - 1
        nodes.append((level, start >> level))
        start += 1 << level
    return nodes


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The subtrees (leaf ranges) of leaf ``index``'s audit path in a tree of ``size``, in the
    order the proof lists their hashes (RFC 9162 section 2.1.3.1, bottom up)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    out: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            out.append((start + k, end))
            end = start + k
        else:
            out.append((start, start + k))
            start += k
    return out[::-1]


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """The subtrees of the proof that the tree of ``old`` leaves is a prefix of the tree of
    ``new`` (RFC 9162 section 2.1.4.1, SUBPROOF), in the proof's order."""
    if not 0 < old <= new:
        raise ValueError(f"no consistency proof from size {old} to {new}")
    out: list[tuple[int, int]] = []
    start, end, whole = 0, new, True
    while old - start != end - start:
        k = _split(end - start)
        if old - start <= k:
            out.append((start + k, end))
            end = start + k
        else:
            out.append((start, start + k))
            start, whole = start + k, False
    if not whole:
        out.append((start, end))
    return out[::-1]


def hashes_of(
    ranges: Sequence[tuple[int, int]], lookup: Callable[[list[Node]], dict[Node, bytes]]
) -> list[bytes]:
    """The hash of each range, from the stored perfect subtrees ``lookup`` returns."""
    covers = [cover(a, b) for a, b in ranges]
    found = lookup(sorted({n for c in covers for n in c}))
    return [fold([found[n] for n in c]) for c in covers]


# -- verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2) ------------------------------------


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> None:
    """Raise :class:`ProofError` unless ``proof`` shows ``leaf`` at ``index`` under ``root``."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} cannot be in a tree of {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    if r != root:
        raise ProofError("the inclusion proof does not lead to the root")


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Raise :class:`ProofError` unless ``proof`` shows the tree of ``old`` leaves with
    ``old_root`` is a prefix of the tree of ``new`` leaves with ``new_root``."""
    if old > new:
        raise ProofError(f"the newer tree ({new} leaves) is smaller than the older ({old})")
    if old == new:
        if proof:
            raise ProofError("a proof between two trees of one size must be empty")
        if old_root != new_root:
            raise ProofError(f"two different roots for one tree size ({old})")
        return
    if old == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the first node of the path
        path.insert(0, old_root)
    if not path:
        raise ProofError("the consistency proof is empty")
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than the trees are deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the consistency proof is shorter than the trees are deep")
    if fr != old_root:
        raise ProofError("the consistency proof does not lead to the older root")
    if sr != new_root:
        raise ProofError("the consistency proof does not lead to the newer root")
