"""Witness cosignatures as C2SP tlog-cosignature defines the Ed25519 kind: the key id of type
0x04, the signed message (``cosignature/v1``, the time line, the checkpoint's text), the
signature as key id, big-endian timestamp and Ed25519 signature; each checked here by
rebuilding it from the spec's words with nothing but hashlib and cryptography."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import (
    COSIGNATURE_V1,
    CheckpointError,
    Signer,
    parse_verifier_key,
)
from flowledger.domain.cosignatures import Cosigner, cosignatures

TEXT = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"


def witness(name: str = "witness.example.com/w1") -> Cosigner:
    return Cosigner(name, Ed25519PrivateKey.generate())


def test_a_cosignature_is_the_specs_bytes() -> None:
    w = witness()
    line = w.cosign(TEXT, 1679315147)
    assert line.startswith("\u2014 witness.example.com/w1 ") and line.endswith("\n")
    raw = base64.b64decode(line.split(" ")[2])
    public = w.private.public_key().public_bytes_raw()
    key_id = hashlib.sha256(b"witness.example.com/w1\n\x04" + public).digest()[:4]
    assert raw[:4] == key_id and len(raw) == 4 + 8 + 64
    assert struct.unpack(">Q", raw[4:12]) == (1679315147,)
    message = ("cosignature/v1\ntime 1679315147\n" + TEXT).encode()
    w.private.public_key().verify(raw[12:], message)  # raises when it is not
    vkey = w.verifier.text()
    keydata = base64.b64encode(b"\x04" + public).decode()
    assert vkey == f"witness.example.com/w1+{key_id.hex()}+{keydata}"
    assert parse_verifier_key(vkey, COSIGNATURE_V1) == w.verifier


def test_cosignatures_of_known_witnesses_are_found_others_ignored() -> None:
    log = Signer("example.com/behind-the-sofa", Ed25519PrivateKey.generate())
    w1, w2, stranger = witness(), witness("witness.example.com/w2"), witness()
    note = log.sign(TEXT) + w1.cosign(TEXT, 10) + stranger.cosign(TEXT, 11) + w2.cosign(TEXT, 12)
    found = cosignatures(note, [w1.verifier, w2.verifier])
    assert [(c.witness.name, c.timestamp) for c in found] == [
        ("witness.example.com/w1", 10),
        ("witness.example.com/w2", 12),
    ]
    assert cosignatures(note, []) == []


def test_a_cosignature_over_another_text_is_refused() -> None:
    log = Signer("example.com/behind-the-sofa", Ed25519PrivateKey.generate())
    w = witness()
    other = TEXT.replace("20852163", "20852164")
    note = log.sign(TEXT) + w.cosign(other, 10)
    with pytest.raises(CheckpointError, match="does not verify"):
        cosignatures(note, [w.verifier])


def test_a_log_signature_is_no_cosignature_even_with_the_same_key() -> None:
    private = Ed25519PrivateKey.generate()
    log = Signer("example.com/behind-the-sofa", private)
    same = Cosigner("example.com/behind-the-sofa", private)
    assert log.verifier.id != same.verifier.id  # type 0x01 and 0x04 differ in their key id
    assert cosignatures(log.sign(TEXT), [same.verifier]) == []


@pytest.mark.parametrize("timestamp", [0, -1, 2**63])
def test_a_cosignature_has_a_time(timestamp: int) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        witness().cosign(TEXT, timestamp)


def test_a_cosignature_of_timestamp_0_is_refused() -> None:
    w = witness()
    log = Signer("example.com/behind-the-sofa", Ed25519PrivateKey.generate())
    signature = w.private.sign(("cosignature/v1\ntime 0\n" + TEXT).encode())
    raw = w.verifier.id + struct.pack(">Q", 0) + signature
    note = log.sign(TEXT) + f"\u2014 {w.name} {base64.b64encode(raw).decode()}\n"
    with pytest.raises(CheckpointError, match="no valid timestamp"):
        cosignatures(note, [w.verifier])
