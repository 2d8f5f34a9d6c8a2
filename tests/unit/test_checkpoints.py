"""Checkpoints and signed notes in the C2SP formats: the signed-note vector of Go's
golang.org/x/mod/sumdb/note opens here, ours open there by the same rules, and a changed text,
another key or a malformed line is refused with a line saying which."""

from __future__ import annotations

import base64
import hashlib

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
    unverified_checkpoint,
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


# -- strictness (each of these was accepted, or a traceback, before) --------------------------

ROOT = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
EMPTY = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="  # SHA-256 of nothing


@pytest.mark.parametrize(
    "size",
    [
        "\u0663",  # Arabic-Indic three: str.isdigit() takes it, int() reads it as 3
        "\u0661\u0662",
        "\u00b2",  # superscript two: isdigit() True, int() raises
        "\uff11",  # fullwidth one
        "9223372036854775808",  # 2**63: beyond any int64 tree size
        "+1",
        " 1",
    ],
)
def test_a_tree_size_is_ascii_digits_below_2_to_the_63(size: str) -> None:
    with pytest.raises(CheckpointError, match="is not a whole number"):
        parse_checkpoint(f"flowledger/l\n{size}\n{ROOT}\n")


def test_an_arabic_indic_size_signed_by_the_key_does_not_open() -> None:
    me = signer()
    note = me.sign(f"flowledger/ledger-1\n\u0663\n{ROOT}\n")
    with pytest.raises(CheckpointError, match="is not a whole number"):
        open_checkpoint(note, me.verifier)


def test_a_signed_size_0_checkpoint_must_carry_the_empty_trees_root() -> None:
    me = signer()
    with pytest.raises(CheckpointError, match="size 0 must carry the empty tree's root"):
        open_checkpoint(me.sign(f"flowledger/ledger-1\n0\n{ROOT}\n"), me.verifier)
    empty = open_checkpoint(me.sign(f"flowledger/ledger-1\n0\n{EMPTY}\n"), me.verifier)
    assert empty.size == 0


@pytest.mark.parametrize("char", ["\x00", "\t", "\r", "\x1b", "\x1f"])
def test_a_note_with_a_control_character_is_refused(char: str) -> None:
    me = signer()
    note = me.sign(f"flowledger/ledger-1\n1\n{ROOT}\nextension{char}line\n")
    with pytest.raises(CheckpointError, match="control characters"):
        open_checkpoint(note, me.verifier)
    with pytest.raises(CheckpointError, match="control characters"):
        unverified_checkpoint(note)


def test_a_checkpoint_whose_origin_is_not_the_keys_name_is_refused() -> None:
    me = signer("flowledger/ledger-1")
    note = me.sign(f"flowledger/ledger-2\n1\n{ROOT}\n")
    with pytest.raises(CheckpointError, match="not the name of the key given"):
        open_checkpoint(note, me.verifier)


def test_the_vkey_is_the_form_go_reads_name_plus_keyid_plus_type_and_key() -> None:
    """golang.org/x/mod/sumdb/note NewVerifier: name+hash+keydata, hash = first 4 bytes of
    SHA-256(name || '\\n' || keydata) in 8 hex digits, keydata = 0x01 || Ed25519 key."""
    me = signer("flowledger/ledger-1")
    name, hex_id, raw = me.verifier.text().split("+", 2)
    keydata = base64.b64decode(raw)
    assert name == "flowledger/ledger-1" and keydata[0] == 1 and len(keydata) == 33
    assert hex_id == hashlib.sha256(name.encode() + b"\n" + keydata).digest()[:4].hex()
    assert parse_verifier_key(me.verifier.text()) == me.verifier


def test_a_witness_key_is_not_taken_for_a_log_key() -> None:
    from flowledger.domain.cosignatures import Cosigner

    vkey = Cosigner("witness.example/w1", Ed25519PrivateKey.generate()).verifier.text()
    with pytest.raises(CheckpointError, match="not an Ed25519 key"):
        parse_verifier_key(vkey)
