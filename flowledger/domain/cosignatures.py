"""Witness cosignatures in the C2SP ``tlog-cosignature`` form (Ed25519, type 0x04): a witness
signs ``cosignature/v1\\ntime <POSIX seconds>\\n`` followed by the checkpoint's text, and its
note signature carries ``key id || timestamp (u64, big-endian) || Ed25519 signature``. The key
id is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``, and a witness's vkey is
``name+id+base64(0x04 || public key)``. No I/O; the keys and the time are given.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from flowledger.domain.checkpoints import (
    COSIGNATURE_V1,
    DASH,
    CheckpointError,
    VerifierKey,
    split_note,
)

HEADER = "cosignature/v1\n"
MAX_TIMESTAMP = 2**63 - 1


def message(text: str, timestamp: int) -> bytes:
    """What a cosignature signs: the header, the time line, the checkpoint's text."""
    return f"{HEADER}time {timestamp}\n{text}".encode()


@dataclass(frozen=True)
class Cosigner:
    """A witness's private key and the name its cosignatures carry."""

    name: str
    private: Ed25519PrivateKey

    @property
    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self.private.public_key().public_bytes_raw(), COSIGNATURE_V1)

    def cosign(self, text: str, timestamp: int) -> str:
        """The signature line (with its newline) cosigning the checkpoint ``text`` at
        ``timestamp`` (POSIX seconds, not 0)."""
        if not 0 < timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"a cosignature's timestamp must be 1..2**63-1, not {timestamp}")
        signature = self.private.sign(message(text, timestamp))
        raw = self.verifier.id + struct.pack(">Q", timestamp) + signature
        return f"{DASH}{self.name} {base64.b64encode(raw).decode()}\n"


@dataclass(frozen=True)
class Cosignature:
    """A cosignature that verified: whose, when, and its line as the note carries it."""

    witness: VerifierKey
    timestamp: int
    line: str


def cosignatures(note: str, witnesses: Sequence[VerifierKey]) -> list[Cosignature]:
    """The cosignatures in ``note`` by the keys ``witnesses``, each verified over the note's
    text; lines of other keys are ignored (signed-note), and one by a known key that does not
    verify is a :class:`CheckpointError` (the whole note is refused)."""
    text, signatures = split_note(note)
    known = {(w.name, w.id): w for w in witnesses if w.kind == COSIGNATURE_V1}
    found: dict[bytes, Cosignature] = {}
    for sig in signatures:
        key = known.get((sig.name, sig.key_id))
        if key is None:
            continue
        if len(sig.signature) != 8 + 64:
            raise CheckpointError(f"the cosignature by {key.name} is not 8 + 64 bytes")
        (timestamp,) = struct.unpack(">Q", sig.signature[:8])
        if not 0 < timestamp <= MAX_TIMESTAMP:
            raise CheckpointError(f"the cosignature by {key.name} has no valid timestamp")
        try:
            Ed25519PublicKey.from_public_bytes(key.public).verify(
                sig.signature[8:], message(text, timestamp)
            )
        except InvalidSignature:
            raise CheckpointError(
                f"the cosignature by {key.name} does not verify: the checkpoint was altered"
            ) from None
        found.setdefault(key.id, Cosignature(key, timestamp, sig.line))
    return list(found.values())
