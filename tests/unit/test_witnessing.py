"""What a witness checks before it cosigns (C2SP tlog-witness add-checkpoint), status by
status: 400 for a malformed request or an old size above the checkpoint's, 403 for a
signature it cannot trust, 404 for a log it does not know, 409 with its size for a stale old
size, 422 for a proof that does not verify."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain import merkle
from flowledger.domain.checkpoints import Checkpoint, Signer
from flowledger.domain.witnessing import (
    MAX_BODY,
    Refused,
    Submission,
    check_submission,
    parse_submission,
)

ORIGIN = "flowledger/ledger-1"
LOG = Signer(ORIGIN, Ed25519PrivateKey.generate())
LEAVES = [merkle.leaf_hash(bytes([i])) for i in range(20)]


def tree(n: int, leaves: list[bytes] = LEAVES) -> Checkpoint:
    return Checkpoint(ORIGIN, n, merkle.root_of(leaves[:n]))


def proof(old: int, new: int, leaves: list[bytes] = LEAVES) -> list[bytes]:
    ranges = merkle.consistency_ranges(old, new)
    return [merkle.root_of(leaves[a:b]) for a, b in ranges]


def submit(old: int, new: int, latest: Checkpoint | None, **kw: object) -> Checkpoint:
    note = kw.pop("note", None) or LOG.sign(tree(new).text())
    path = kw.pop("proof", None)
    sub = Submission(old, proof(old, new) if path is None and old else list(path or []), note)
    logs = kw.pop("logs", {ORIGIN: [LOG.verifier]})
    return check_submission(parse_submission(sub.body()), logs, latest)  # type: ignore[arg-type]


def refused(status: int, *args: object, **kw: object) -> Refused:
    with pytest.raises(Refused) as caught:
        submit(*args, **kw)  # type: ignore[arg-type]
    assert caught.value.status == status, caught.value.reason
    return caught.value


def test_a_first_checkpoint_and_a_consistent_next_are_accepted() -> None:
    assert submit(0, 7, None) == tree(7)
    assert submit(7, 13, tree(7)) == tree(13)
    assert submit(13, 13, tree(13)) == tree(13)


def test_a_stale_old_size_is_409_with_the_witnesss_size() -> None:
    assert refused(409, 7, 13, tree(9)).size == 9
    assert refused(409, 0, 13, tree(9)).size == 9
    assert refused(409, 3, 13, None).size == 0


def test_an_inconsistent_checkpoint_is_422() -> None:
    forked = [*LEAVES[:8], merkle.leaf_hash(b"other"), *LEAVES[9:]]
    latest = tree(12, forked)
    refused(422, 12, 15, latest)  # the proof from the true tree does not lead to the fork's
    refused(422, 7, 13, tree(7), proof=proof(7, 13)[:-1])  # one hash short
    refused(422, 7, 13, tree(7), proof=[*proof(7, 13), LEAVES[0]])  # one too many
    refused(422, 13, 13, Checkpoint(ORIGIN, 13, LEAVES[0]))  # one size, two roots
    refused(422, 0, 5, None, proof=[LEAVES[0]])  # a proof from the empty tree


def test_size_0_must_carry_the_empty_root() -> None:
    note = LOG.sign(Checkpoint(ORIGIN, 0, LEAVES[0]).text())
    refused(422, 0, 0, None, note=note)
    empty = LOG.sign(Checkpoint(ORIGIN, 0, merkle.EMPTY_ROOT).text())
    assert submit(0, 0, None, note=empty).size == 0


def test_signatures_and_origins() -> None:
    other = Signer(ORIGIN, Ed25519PrivateKey.generate())
    refused(403, 0, 5, None, note=other.sign(tree(5).text()))
    altered = LOG.sign(tree(5).text()).replace("\n5\n", "\n6\n", 1)
    refused(403, 0, 6, None, note=altered)
    stranger = Signer("flowledger/ledger-2", Ed25519PrivateKey.generate())
    note = stranger.sign(Checkpoint("flowledger/ledger-2", 5, tree(5).root).text())
    refused(404, 0, 5, None, note=note)
    # A signature by a key the witness does not know, beside the log's, is ignored.
    assert submit(
        0, 5, None, note=LOG.sign(tree(5).text()) + other.sign(tree(5).text()).split("\n\n")[1]
    ) == tree(5)


def test_an_old_size_above_the_checkpoints_is_400() -> None:
    refused(400, 9, 5, tree(9), proof=[])


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"old 1\n", "no blank line"),
        (b"old 01\n\nx", "`old <size>`"),
        (b"old -1\n\nx", "`old <size>`"),
        ("old \u0663\n\nx".encode(), "`old <size>`"),
        (b"old 99999999999999999999\n\nx", "`old <size>`"),
        (b"old 9223372036854775808\n\nx", "`old <size>`"),
        (b"new 1\n\nx", "`old <size>`"),
        (b"old 1\nnot base64!\n\nx", "proof line 1"),
        (b"old 1\nAAAA\n\nx", "proof line 1"),
        (b"old 1\n" + b"A" * 43 + b"=\n" + base64.b64encode(bytes(33)) + b"\n\nx", "line 2"),
        (b"old 1\n" + (base64.b64encode(bytes(32)) + b"\n") * 64 + b"\nx", "more than 63"),
        (b"\xff\xfe\n\n", "not UTF-8"),
    ],
)
def test_a_malformed_request_is_400(body: bytes, says: str) -> None:
    with pytest.raises(Refused, match=says) as caught:
        parse_submission(body)
    assert caught.value.status == 400


def test_an_oversized_request_is_413() -> None:
    with pytest.raises(Refused) as caught:
        parse_submission(b"old 0\n\n" + b"x" * MAX_BODY)
    assert caught.value.status == 413


@pytest.mark.parametrize(
    "note",
    [
        "garbage",
        "flowledger/ledger-1\n5\n",
        "flowledger/ledger-1\n\u0665\nAAAA\n\n\u2014 x AAAA\n",
        "flowledger/ledger-1\n5\n" + "A" * 43 + "=\n\n\u2014 flowledger/ledger-1 !!!\n",
        "flowledger/ledger-1\x00\n5\n" + "A" * 43 + "=\n\n\u2014 a AAAAAAAA\n",
    ],
)
def test_a_malformed_checkpoint_is_400(note: str) -> None:
    with pytest.raises(Refused) as caught:
        check_submission(Submission(0, [], note), {ORIGIN: [LOG.verifier]}, None)
    assert caught.value.status == 400


def test_sixteen_signatures_are_taken_and_more_than_sixty_four_refused() -> None:
    others = [Signer(f"o.example/{n}", Ed25519PrivateKey.generate()) for n in range(64)]
    text = tree(5).text()
    lines = [o.sign(text).split("\n\n", 1)[1] for o in others]
    note = LOG.sign(text)
    assert submit(0, 5, None, note=note + "".join(lines[:15])) == tree(5)
    with pytest.raises(Refused, match="more than 64 signatures") as caught:
        submit(0, 5, None, note=note + "".join(lines))
    assert caught.value.status == 400
