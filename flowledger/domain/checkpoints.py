"""Signed checkpoints: the tree's size and root, signed, in the C2SP formats Certificate
Transparency's successors use (``tlog-checkpoint`` inside a ``signed-note``), so that a third
party's tools can read them. No I/O; the keys are given.

A checkpoint's text is three lines: the origin (the ledger's identity), the tree size in
decimal, the root hash in base64. The note is that text, a blank line, and one line per
signature: ``— <key name> <base64(4-byte key id || Ed25519 signature of the text)>``. The key
id is the first four bytes of ``SHA-256(key name || 0x0A || type || public key)``; a verifier
key (a *vkey*, as Go's ``golang.org/x/mod/sumdb/note`` reads it) is written
``<name>+<key id in hex>+<base64(type || public key)>``. The type is 0x01 for the log's own
Ed25519 signatures, 0x04 for a witness's timestamped cosignatures
(:mod:`flowledger.domain.cosignatures`).

A note with a control character other than the newline is refused, as signed-note says; a
checkpoint's size is ASCII digits below 2**63, and a checkpoint of size 0 must carry the empty
tree's root (RFC 9162 section 2.1.1); a checkpoint opened with a key must have that key's name
as its origin.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from flowledger.domain.merkle import EMPTY_ROOT

ED25519 = b"\x01"
COSIGNATURE_V1 = b"\x04"  # a timestamped Ed25519 cosignature (C2SP tlog-cosignature)
DASH = "\u2014 "  # an em dash and a space begin each signature line
_NAME = re.compile(r"^[^\s+]+$")
_SIZE = re.compile(r"^(0|[1-9][0-9]{0,18})$")  # ASCII digits only: str.isdigit takes "²"
MAX_SIZE = 2**63 - 1  # a tree size as Go's tlog and the witnesses hold it (int64)
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")
_KEY_ID = re.compile(r"^[0-9a-fA-F]{8}$")
MAX_SIGNATURES = 64  # signed-note: a verifier must accept 16


class CheckpointError(ValueError):
    """A checkpoint, note or key that is malformed or does not verify; says which and why."""


class BadSignature(CheckpointError):
    """A signature by the key given that does not verify (not merely a missing one)."""


def valid_name(name: str) -> bool:
    """A key name or origin as signed-note allows it: not empty, no spaces, no '+'."""
    return bool(_NAME.match(name))


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


def parse_checkpoint(text: str, *, empty_root: bool = True) -> Checkpoint:
    """A checkpoint's text; with ``empty_root=False`` a size-0 checkpoint's root is left for
    the caller to check (a witness answers it with its own status)."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "":
        raise CheckpointError("a checkpoint is an origin, a size and a root hash, a line each")
    origin, size, root = lines[0], lines[1], lines[2]
    if not origin or not _NAME.match(origin):
        raise CheckpointError(f"the checkpoint's origin {origin!r} is not a name")
    if not _SIZE.match(size) or int(size) > MAX_SIZE:
        raise CheckpointError(f"the checkpoint's tree size {size[:40]!r} is not a whole number")
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != 32:
        raise CheckpointError("the checkpoint's root hash is not 32 bytes of base64")
    if empty_root and size == "0" and digest != EMPTY_ROOT:
        raise CheckpointError(
            "a checkpoint of size 0 must carry the empty tree's root (SHA-256 of nothing)"
        )
    if any(not line for line in lines[3:-1]):
        raise CheckpointError("a checkpoint's extension lines must not be empty")
    return Checkpoint(origin, int(size), digest)


def key_id(name: str, public: bytes, kind: bytes = ED25519) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + kind + public).digest()[:4]


@dataclass(frozen=True)
class VerifierKey:
    """A public key as a checkpoint's reader is given it."""

    name: str
    public: bytes
    kind: bytes = ED25519

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.public, self.kind)

    def text(self) -> str:
        raw = base64.b64encode(self.kind + self.public).decode()
        return f"{self.name}+{self.id.hex()}+{raw}"


_KINDS = {ED25519: "an Ed25519 key (type 0x01)", COSIGNATURE_V1: "a witness's key (type 0x04)"}


def parse_verifier_key(text: str, kind: bytes = ED25519) -> VerifierKey:
    """``name+keyid+base64``, as :meth:`VerifierKey.text` writes it (a vkey), of type
    ``kind``: the log's key (0x01) or a witness's cosignature key (0x04)."""
    parts = text.strip().split("+", 2)  # base64 has "+" of its own
    if (
        len(parts) != 3
        or not _NAME.match(parts[0])
        or not re.fullmatch(r"[0-9a-fA-F]{8}", parts[1])
    ):
        raise CheckpointError(
            "a verifier key reads NAME+KEYID+BASE64 (as `flowledger key create` prints it)"
        )
    name, hex_id, raw = parts
    try:
        decoded = base64.b64decode(raw, validate=True)
    except binascii.Error:
        decoded = b""
    if len(decoded) != 33 or decoded[:1] != kind:
        raise CheckpointError(f"the verifier key is not {_KINDS[kind]}")
    key = VerifierKey(name, decoded[1:], kind)
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


@dataclass(frozen=True)
class NoteSignature:
    """One signature line of a note: the key's name, its id and what follows it."""

    name: str
    key_id: bytes
    signature: bytes
    line: str  # as it stood, with its newline


def split_note(note: str) -> tuple[str, list[NoteSignature]]:
    """A signed note's text (with its final newline) and its signature lines, each well
    formed; :class:`CheckpointError` names the first thing that is not."""
    if _CONTROL.search(note):
        raise CheckpointError("a signed note must not hold control characters but newlines")
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise CheckpointError("not a signed note: no blank line before its signatures")
    lines = signatures[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(f"a signed note of more than {MAX_SIGNATURES} signatures")
    found = []
    for line in lines:
        if not line.startswith(DASH) or line.count(" ") != 2:
            raise CheckpointError(f"not a signature line: {line[:60]!r}")
        name, raw = line[len(DASH) :].split(" ")
        try:
            decoded = base64.b64decode(raw, validate=True)
        except binascii.Error:
            raise CheckpointError(f"the signature by {name[:60]} is not base64") from None
        if not _NAME.match(name) or len(decoded) < 5:
            raise CheckpointError(f"not a signature line: {line[:60]!r}")
        found.append(NoteSignature(name, decoded[:4], decoded[4:], line + "\n"))
    return text + "\n", found


def open_note(note: str, key: VerifierKey) -> str:
    """The text of ``note`` once ``key``'s signature on it verifies; a
    :class:`CheckpointError` names what is wrong (no signature by that key, or one that does
    not verify: another key of that name, or an altered text)."""
    text, signatures = split_note(note)
    signers = []
    for sig in signatures:
        signers.append(f"{sig.name} ({sig.key_id.hex()})")
        if sig.name != key.name or sig.key_id != key.id:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(key.public).verify(sig.signature, text.encode())
        except InvalidSignature:
            raise BadSignature(
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
    return parse_checkpoint(split_note(note)[0])


def open_checkpoint(note: str, key: VerifierKey) -> Checkpoint:
    """The checkpoint a note carries, once ``key``'s signature on it verifies and its origin
    is the key's name (a log's key signs its own log's checkpoints only)."""
    cp = parse_checkpoint(open_note(note, key))
    if cp.origin != key.name:
        raise CheckpointError(
            f"the checkpoint's origin {cp.origin!r} is not the name of the key given "
            f"({key.name}): a checkpoint of another log"
        )
    return cp
