"""The Merkle tree against RFC 9162's own recursive definitions (MTH, PATH, SUBPROOF): every
tree size 1..64 and random larger ones, built the way storage builds it (one append at a time,
perfect subtrees kept) and proven from those subtrees."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowledger.domain import merkle


def leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n)]


def mth(d: list[bytes]) -> bytes:
    if len(d) == 1:
        return d[0]
    k = 1
    while k * 2 < len(d):
        k *= 2
    return merkle.node_hash(mth(d[:k]), mth(d[k:]))


def path(m: int, d: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.3.1, word for word."""
    if len(d) == 1:
        return []
    k = 1
    while k * 2 < len(d):
        k *= 2
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]


def subproof(m: int, d: list[bytes], whole: bool) -> list[bytes]:
    """RFC 9162 2.1.4.1, word for word."""
    n = len(d)
    if m == n:
        return [] if whole else [mth(d)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return [*subproof(m, d[:k], whole), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


class Stored:
    """The tree as storage keeps it: appended one leaf at a time, every perfect subtree kept."""

    def __init__(self, d: list[bytes]) -> None:
        self.nodes: dict[merkle.Node, bytes] = {}
        edge: list[bytes] = []
        for i, leaf in enumerate(d):
            for level, index, h in merkle.append(edge, i, leaf):
                self.nodes[level, index] = h
        self.edge = edge

    def lookup(self, wanted: list[merkle.Node]) -> dict[merkle.Node, bytes]:
        return {n: self.nodes[n] for n in wanted}

    def root(self, size: int) -> bytes:
        return merkle.fold([self.nodes[n] for n in merkle.compact_range(size)])


def check_size(n: int, tree: Stored, d: list[bytes]) -> None:
    root = tree.root(n)
    assert root == mth(d[:n]) == merkle.root_of(d[:n])
    for i in range(n):
        proof = merkle.hashes_of(merkle.inclusion_ranges(i, n), tree.lookup)
        assert proof == path(i, d[:n])
        merkle.verify_inclusion(i, n, d[i], proof, root)
    for m in range(1, n + 1):
        proof = merkle.hashes_of(merkle.consistency_ranges(m, n), tree.lookup)
        assert proof == subproof(m, d[:n], True)
        merkle.verify_consistency(m, n, tree.root(m), root, proof)


def test_every_tree_size_from_1_to_64_proves_as_rfc_9162_says() -> None:
    d = leaves(64)
    tree = Stored(d)
    for n in range(1, 65):
        check_size(n, tree, d)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(65, 3000), data=st.data())
def test_random_larger_trees_prove_as_rfc_9162_says(n: int, data: st.DataObject) -> None:
    d = leaves(n)
    tree = Stored(d)
    assert tree.root(n) == mth(d)
    for i in data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)):
        proof = merkle.hashes_of(merkle.inclusion_ranges(i, n), tree.lookup)
        assert proof == path(i, d)
        merkle.verify_inclusion(i, n, d[i], proof, tree.root(n))
    for m in data.draw(st.lists(st.integers(1, n), min_size=1, max_size=8)):
        proof = merkle.hashes_of(merkle.consistency_ranges(m, n), tree.lookup)
        assert proof == subproof(m, d, True)
        merkle.verify_consistency(m, n, tree.root(m), tree.root(n), proof)


def test_the_right_edge_is_the_compact_range() -> None:
    d = leaves(45)
    tree = Stored(d)
    assert tree.edge == [tree.nodes[n] for n in merkle.compact_range(45)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 31, 64])
def test_a_changed_leaf_or_path_fails_inclusion(n: int) -> None:
    d = leaves(n)
    tree = Stored(d)
    root = tree.root(n)
    for i in range(n):
        proof = merkle.hashes_of(merkle.inclusion_ranges(i, n), tree.lookup)
        with pytest.raises(merkle.ProofError):
            merkle.verify_inclusion(i, n, merkle.leaf_hash(b"forged"), proof, root)
        if proof:
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(i, n, d[i], proof[:-1], root)
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(i, n, d[i], [*proof, proof[0]], root)


@pytest.mark.parametrize(("m", "n"), [(1, 2), (3, 7), (4, 8), (5, 64), (63, 64), (6, 9)])
def test_a_forked_or_truncated_tree_fails_consistency(m: int, n: int) -> None:
    d = leaves(n)
    tree = Stored(d)
    proof = merkle.hashes_of(merkle.consistency_ranges(m, n), tree.lookup)
    forked = Stored([*d[: m - 1], merkle.leaf_hash(b"other"), *d[m:]])
    with pytest.raises(merkle.ProofError, match="root"):
        merkle.verify_consistency(m, n, forked.root(m), tree.root(n), proof)
    with pytest.raises(merkle.ProofError, match="smaller"):
        merkle.verify_consistency(n, m, tree.root(n), tree.root(m), proof)
