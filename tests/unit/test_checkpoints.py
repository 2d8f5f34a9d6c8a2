"""Checkpoints and signed notes in the C2SP formats: the signed-note vector of Go's
golang.org/x/mod/sumdb/note opens here, ours open there by the same rules, and a changed text,
another key or a malformed line is refused with a line saying which."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import (
    Checkpoint,
    CheckpointError,
    Signer,
    open_checkpoint,
    open_note,
    parse_checkpoint,
    parse_verifier_key,
)

# golang.org/x/mod/sumdb/note, note_test.go: a verifier key and a note it signed.
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT
    + "\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXg"
    "KvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def test_go_sumdb_notes_vector_opens() -> None:
    key = parse_verifier_key(GO_VKEY)
    assert key.text() == GO_VKEY
    assert open_note(GO_NOTE, key) == GO_TEXT


def test_a_changed_text_does_not_verify() -> None:
    key = parse_verifier_key(GO_VKEY)
    with pytest.raises(CheckpointError, match="does not verify: the checkpoint was altered"):
        open_note(GO_NOTE.replace("answer", "question"), key)


def signer(name: str = "flowledger/ledger-1") -> Signer:
    return Signer(name, Ed25519PrivateKey.generate())


def test_a_signed_checkpoint_opens_with_its_key_and_no_other() -> None:
    me = signer()
    cp = Checkpoint("flowledger/ledger-1", 42, bytes(range(32)))
    note = me.sign(cp.text())
    assert note.startswith(
        "flowledger/ledger-1\n42\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n\n"
    )
    assert open_checkpoint(note, me.verifier) == cp
    assert open_checkpoint(note, parse_verifier_key(me.verifier.text())) == cp
    with pytest.raises(CheckpointError, match="not signed by the key given"):
        open_checkpoint(note, signer().verifier)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("origin\n12\n", "an origin, a size and a root hash"),
        ("has space\n1\n" + "A" * 43 + "=\n", "is not a name"),
        ("o\n-1\n" + "A" * 43 + "=\n", "is not a whole number"),
        ("o\n01\n" + "A" * 43 + "=\n", "is not a whole number"),
        ("o\n1\nnot base64\n", "not 32 bytes of base64"),
    ],
)
def test_a_malformed_checkpoint_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(CheckpointError, match=says):
        parse_checkpoint(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("PeterNeumann+c74f20a3", "NAME\\+KEYID\\+BASE64"),
        ("PeterNeumann+00000000+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
        ("PeterNeumann+c74f20a3+AQ==", "not an Ed25519 key"),
    ],
)
def test_a_malformed_verifier_key_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(CheckpointError, match=says):
        parse_verifier_key(text)
