"""Signed checkpoints: the tree's size and root, signed, in the C2SP formats Certificate
Transparency's successors use (``tlog-checkpoint`` inside a ``signed-note``), so that a third
party's tools can read them. No I/O; the keys are given.

A checkpoint's text is three lines: the origin (the ledger's identity), the tree size in
decimal, the root hash in base64. The note is that text, a blank line, and one line per
signature: ``— <key name> <base64(4-byte key id || Ed25519 signature of the text)>``. The key
id is the first four bytes of ``SHA-256(key name || 0x0A || 0x01 || public key)``; a verifier
key is written ``<name>+<key id in hex>+<base64(0x01 || public key)>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ED25519 = b"\x01"
DASH = "\u2014 "  # an em dash and a space begin each signature line
_NAME = re.compile(r"^[^\s+]+$")


class CheckpointError(ValueError):
    """A checkpoint, note or key that is malformed or does not verify; says which and why."""


def origin_of(ledger_id: str) -> str:
    """The checkpoint origin of a ledger: its identity, as a schema-less name."""
    return f"flowledger/{ledger_id}"


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"


def parse_checkpoint(text: str) -> Checkpoint:
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise CheckpointError("a checkpoint is an origin, a size and a root hash, a line each")
    origin, size, root = lines[0], lines[1], lines[2]
    if not origin or not _NAME.match(origin):
        raise CheckpointError(f"the checkpoint's origin {origin!r} is not a name")
    if not size.isdigit() or (size.startswith("0") and size != "0"):
        raise CheckpointError(f"the checkpoint's tree size {size!r} is not a whole number")
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != 32:
        raise CheckpointError("the checkpoint's root hash is not 32 bytes of base64")
    return Checkpoint(origin, int(size), digest)


def key_id(name: str, public: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    """A public key as a checkpoint's reader is given it."""

    name: str
    public: bytes

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.public)

    def text(self) -> str:
        raw = base64.b64encode(ED25519 + self.public).decode()
        return f"{self.name}+{self.id.hex()}+{raw}"


def parse_verifier_key(text: str) -> VerifierKey:
    """``name+keyid+base64``, as :meth:`VerifierKey.text` writes it."""
    parts = text.strip().split("+", 2)  # base64 has "+" of its own
    if len(parts) != 3 or not parts[0]:
        raise CheckpointError(
            "a verifier key reads NAME+KEYID+BASE64 (as `flowledger key create` prints it)"
        )
    name, hex_id, raw = parts
    try:
        decoded = base64.b64decode(raw, validate=True)
    except binascii.Error:
        decoded = b""
    if len(decoded) != 33 or decoded[:1] != ED25519:
        raise CheckpointError("the verifier key is not an Ed25519 key")
    key = VerifierKey(name, decoded[1:])
    if key.id.hex() != hex_id.lower():
        raise CheckpointError(f"the verifier key's id {hex_id} does not match its key")
    return key


@dataclass(frozen=True)
class Signer:
    """A private key and the name its signatures carry."""

    name: str
    private: Ed25519PrivateKey

    @property
    def verifier(self) -> VerifierKey:
        public = self.private.public_key().public_bytes_raw()
        return VerifierKey(self.name, public)

    def sign(self, text: str) -> str:
        """The signed note of ``text`` (which ends in a newline)."""
        signature = self.private.sign(text.encode())
        line = base64.b64encode(self.verifier.id + signature).decode()
        return f"{text}\n{DASH}{self.name} {line}\n"


def open_note(note: str, key: VerifierKey) -> str:
    """The text of ``note`` once ``key``'s signature on it verifies; a
    :class:`CheckpointError` names what is wrong (no signature by that key, or one that does
    not verify: another key of that name, or an altered text)."""
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise CheckpointError("not a signed note: no blank line before its signatures")
    text += "\n"
    signers = []
    for line in signatures[:-1].split("\n"):
        if not line.startswith(DASH) or line.count(" ") != 2:
            raise CheckpointError(f"not a signature line: {line[:60]!r}")
        name, raw = line[len(DASH) :].split(" ")
        try:
            decoded = base64.b64decode(raw, validate=True)
        except binascii.Error:
            raise CheckpointError(f"the signature by {name} is not base64") from None
        signers.append(f"{name} ({decoded[:4].hex()})")
        if name != key.name or decoded[:4] != key.id:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(key.public).verify(decoded[4:], text.encode())
        except InvalidSignature:
            raise CheckpointError(
                f"the signature by {key.name} does not verify: the checkpoint was altered"
            ) from None
        return text
    raise CheckpointError(
        f"the checkpoint is not signed by the key given ({key.name}, id {key.id.hex()}); "
        f"it is signed by {', '.join(signers)}"
    )


def unverified_checkpoint(note: str) -> Checkpoint:
    """The checkpoint a note carries, its signatures not checked (the ledger reading back a
    checkpoint it is asked to prove against: whoever reads the proof checks them)."""
    text, sep, _ = note.rpartition("\n\n")
    if not sep:
        raise CheckpointError("not a signed note: no blank line before its signatures")
    return parse_checkpoint(text + "\n")


def open_checkpoint(note: str, key: VerifierKey) -> Checkpoint:
    """The checkpoint a note carries, once ``key``'s signature on it verifies."""
    return parse_checkpoint(open_note(note, key))
