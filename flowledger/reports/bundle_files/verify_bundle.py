#!/usr/bin/env python3
"""Check an auditor's bundle from a flowledger ledger, with nothing of the ledger installed.

    python3 verify_bundle.py [BUNDLE_DIR] [--key log.vkey] [--witness VKEY ...] [--quorum N]

Needs Python 3.10 or later and the ``cryptography`` package (``pip install cryptography``);
everything else is the standard library, and this one file is all the code there is: read it.
The bundle's format is written down in the ledger's ``docs/log-format.md``.

What it checks, and prints a line for:

1. ``checkpoint`` is a C2SP signed note carrying a tree size and root, signed by the key in
   ``log.vkey`` (or ``--key``), whose name is the checkpoint's origin.
2. Each ``events/<N>.json`` holds the exact bytes of event N as the ledger sealed it; with the
   previous event's hash (the ``extra`` line of ``events/<N>.tlog-proof``) they hash to the
   event's chain hash, whose leaf the proof's Merkle path (RFC 9162) leads to the checkpoint's
   root. One byte changed anywhere, an event left out of the log, or the log rewritten since
   the checkpoint, and the path no longer leads there.
3. Consecutive events link up: each one's previous hash is the hash of the one before it.
4. ``bundle.json`` says which operations or which range of events the bundle is about; every
   event listed is there and of what it claims.
5. The checkpoint's cosignatures (C2SP tlog-cosignature, Ed25519) by the witnesses in
   ``witnesses.vkeys`` (or ``--witness``): each one there must verify, and all of them, or
   ``--quorum N`` of them, must be there. Get the witnesses' keys from the witnesses, as the
   log's from the log.

Exit 0: every check passed. 1: a check failed (the line says which and why). 2: the bundle or
the key cannot be read.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PROOF_HEADER = "c2sp.org/tlog-proof@v1"
BUNDLE_FORMAT = "flowledger-bundle/1"
MAX_FILE = 1 << 20  # no file of a bundle is near this: a larger one is not the ledger's


class Failed(Exception):
    """A check that failed: the bundle does not prove what it says."""


class Unreadable(Exception):
    """A file of the bundle, or the key, that cannot be read at all."""


# -- signed notes and checkpoints (C2SP signed-note, tlog-checkpoint) --------------------------


def parse_vkey(text: str, kind: int = 1) -> tuple[str, bytes, bytes]:
    """``name+keyid+base64(type || Ed25519 public key)``: the name, key id and public key. The
    type is 0x01 for a log's key, 0x04 for a witness's (timestamped cosignatures)."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or not parts[0]:
        raise Unreadable("the key is not NAME+KEYID+BASE64")
    name, hex_id, raw = parts
    try:
        key = base64.b64decode(raw, validate=True)
    except binascii.Error:
        key = b""
    if len(key) != 33 or key[0] != kind:
        what = "a log's Ed25519 key (type 0x01)" if kind == 1 else "a witness's key (type 0x04)"
        raise Unreadable(f"the key {name!r} is not {what}")
    key_id = hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]
    if key_id.hex() != hex_id.lower():
        raise Unreadable(f"the key's id {hex_id} does not match the key")
    return name, key_id, key[1:]


def signature_lines(signatures: str) -> list[tuple[str, bytes]]:
    """A signed note's signature lines (``— <name> <base64>``, each ending in a newline): the
    signer's name and the decoded signature of each."""
    found = []
    for line in signatures[:-1].split("\n"):
        if not line.startswith("\u2014 ") or line.count(" ") != 2:
            raise Failed(f"not a signature line: {line[:60]!r}")
        signer, raw = line[2:].split(" ")
        try:
            found.append((signer, base64.b64decode(raw, validate=True)))
        except binascii.Error:
            raise Failed(f"the signature by {signer} is not base64") from None
    return found


def open_checkpoint(note: str, vkey: tuple[str, bytes, bytes]) -> tuple[str, int, bytes]:
    """The origin, size and root of a checkpoint note signed by ``vkey``."""
    name, key_id, public = vkey
    if any(ord(c) < 0x20 and c != "\n" for c in note):
        raise Failed("the checkpoint holds control characters")
    text, sep, signatures = note.rpartition("\n\n")
    if not sep or not signatures.endswith("\n"):
        raise Failed("the checkpoint is not a signed note (no blank line before signatures)")
    body = text + "\n"
    lines = body.split("\n")
    if len(lines) < 4:
        raise Failed("the checkpoint is not an origin, a size and a root, a line each")
    origin, size_text, root_text = lines[0], lines[1], lines[2]
    if not (size_text.isascii() and size_text.isdigit()) or (
        size_text.startswith("0") and size_text != "0"
    ):
        raise Failed(f"the checkpoint's size {size_text!r} is not a decimal number")
    try:
        root = base64.b64decode(root_text, validate=True)
    except binascii.Error:
        root = b""
    if len(root) != 32:
        raise Failed("the checkpoint's root is not 32 bytes of base64")
    if origin != name:
        raise Failed(f"the checkpoint is of {origin!r}, but the key is named {name!r}")
    size = int(size_text)
    if size == 0 and root != hashlib.sha256(b"").digest():
        raise Failed("an empty tree's root is SHA-256 of nothing; the checkpoint says otherwise")
    for signer, decoded in signature_lines(signatures):
        if signer != name or decoded[:4] != key_id:
            continue  # another signer's (a witness's cosignature)
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(decoded[4:], body.encode())
        except InvalidSignature:
            raise Failed(
                f"the signature by {name} does not verify: the checkpoint was altered"
            ) from None
        return origin, size, root
    raise Failed(f"the checkpoint is not signed by {name} (key id {key_id.hex()})")


def cosigned_by(note: str, witnesses: list[tuple[str, bytes, bytes]]) -> list[str]:
    """The names of ``witnesses`` whose cosignature (``cosignature/v1``, a timestamp, the
    checkpoint's text) the note carries and that verifies; one that does not verify fails."""
    text, _, signatures = note.rpartition("\n\n")
    body = text + "\n"
    names: list[str] = []
    for signer, decoded in signature_lines(signatures):
        for name, key_id, public in witnesses:
            if signer != name or decoded[:4] != key_id or name in names:
                continue
            stamp = decoded[4:12]
            timestamp = int.from_bytes(stamp, "big")
            message = f"cosignature/v1\ntime {timestamp}\n{body}".encode()
            try:
                if len(decoded) != 4 + 8 + 64 or not 0 < timestamp < 2**63:
                    raise InvalidSignature
                Ed25519PublicKey.from_public_bytes(public).verify(decoded[12:], message)
            except InvalidSignature:
                raise Failed(
                    f"the cosignature by {name} does not verify: the checkpoint was altered"
                ) from None
            names.append(name)
    return names


# -- the Merkle tree (RFC 9162 section 2.1.3.2) ------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_path(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    """The root an inclusion path for leaf ``index`` of a tree of ``size`` leads to."""
    if not 0 <= index < size:
        raise Failed(f"leaf {index} cannot be in a tree of {size}")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise Failed("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise Failed("the inclusion proof is shorter than the tree is deep")
    return r


# -- the bundle --------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE:
            raise Unreadable(f"{path} is larger than any file of a bundle")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"cannot read {path}: {exc}") from None


def read_proof(text: str, where: str) -> tuple[bytes, int, list[bytes], str]:
    """A C2SP tlog-proof: its extra data, index, inclusion path and checkpoint."""
    head, sep, note = text.partition("\n\n")
    lines = head.split("\n")
    if not sep or lines[0] != PROOF_HEADER:
        raise Failed(f"{where} is not a {PROOF_HEADER} proof")
    extra, at = b"", 1
    try:
        if len(lines) > at and lines[at].startswith("extra "):
            extra = base64.b64decode(lines[at][6:], validate=True)
            at += 1
        if len(lines) <= at or not lines[at].startswith("index "):
            raise Failed(f"{where} has no index line")
        index_text = lines[at][6:]
        if not (index_text.isascii() and index_text.isdigit()) or (
            index_text.startswith("0") and index_text != "0"
        ):
            raise Failed(f"{where}: the index {index_text!r} is not a decimal number")
        path = [base64.b64decode(h, validate=True) for h in lines[at + 1 :]]
    except binascii.Error:
        raise Failed(f"{where} holds a line that is not base64") from None
    if any(len(h) != 32 for h in path) or len(extra) != 32:
        raise Failed(f"{where} holds a hash that is not 32 bytes")
    return extra, int(index_text), path, note


def check_event(
    folder: Path, seq: int, checkpoint: tuple[str, int, bytes], note: str
) -> tuple[dict[str, object], str, str]:
    """Event ``seq``'s fields, its previous hash and its hash, once its proof checks out."""
    _, size, root = checkpoint
    raw_path, proof_path = (
        folder / "events" / f"{seq}.json",
        folder / "events" / f"{seq}.tlog-proof",
    )
    try:
        raw = raw_path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read {raw_path}: {exc}") from None
    prev, index, path, proof_note = read_proof(read_text(proof_path), str(proof_path))
    if proof_note != note:
        raise Failed(f"{proof_path} is against another checkpoint than the bundle's")
    if index != seq - 1:
        raise Failed(f"{proof_path} proves leaf {index}, not event {seq}'s ({seq - 1})")
    try:
        fields = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Failed(f"{raw_path} is not the JSON of an event") from None
    if not isinstance(fields, dict) or fields.get("seq") != seq:
        raise Failed(f"{raw_path} is not event {seq}")
    digest = hashlib.sha256(prev.hex().encode() + raw).hexdigest()
    if root_from_path(index, size, leaf_hash(bytes.fromhex(digest)), path) != root:
        raise Failed(
            f"event {seq} is not in the log the checkpoint signs: the event was altered, or "
            "the log was changed before it since the checkpoint was signed"
        )
    return fields, prev.hex(), digest


def verify(
    folder: Path, key_text: str, witness_texts: list[str] | None = None, quorum: int | None = None
) -> list[str]:
    """Every check of the bundle in ``folder``; the lines to print. Raises on a failure.
    ``witness_texts`` are the witnesses' vkeys (by default ``witnesses.vkeys``, if any), of
    which ``quorum`` (by default all) must have cosigned."""
    vkey = parse_vkey(key_text)
    if witness_texts is None:
        kept = folder / "witnesses.vkeys"
        witness_texts = read_text(kept).split() if kept.exists() else []
    witnesses = [parse_vkey(text, kind=4) for text in witness_texts]
    if quorum is None:
        quorum = len(witnesses)
    if quorum > len(witnesses):
        raise Unreadable(f"--quorum {quorum} needs as many witness keys; {len(witnesses)} given")
    note = read_text(folder / "checkpoint")
    checkpoint = open_checkpoint(note, vkey)
    origin, size, _ = checkpoint
    out = [f"checkpoint ok: {origin} at {counted(size, 'event')}, signed by {vkey[0]}"]
    cosigners = cosigned_by(note, witnesses)
    if len(cosigners) < quorum:
        lacking = [w[0] for w in witnesses if w[0] not in cosigners]
        raise Failed(
            f"the checkpoint is cosigned by {len(cosigners)} of the witnesses given, "
            f"{quorum} required: missing {', '.join(lacking)}"
            + (f" (cosigned by {', '.join(cosigners)})" if cosigners else "")
        )
    if witnesses:
        out.append(
            f"cosigned by {len(cosigners)} of {len(witnesses)} witnesses: "
            + (", ".join(cosigners) or "none")
        )
    try:
        claims = json.loads(read_text(folder / "bundle.json"))
    except (ValueError, RecursionError):
        raise Unreadable("bundle.json is not JSON") from None
    if not isinstance(claims, dict) or claims.get("format") != BUNDLE_FORMAT:
        raise Unreadable(f"bundle.json is not a {BUNDLE_FORMAT} description")
    seqs = claims.get("events")
    if (
        not isinstance(seqs, list)
        or not seqs
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in seqs)
        or seqs != sorted(set(seqs))
    ):
        raise Failed("bundle.json lists no events, or lists them out of order")
    operations = claims.get("operations") or []
    if claims.get("origin") != origin:
        raise Failed(f"bundle.json is about {claims.get('origin')!r}, the checkpoint {origin!r}")
    seen: dict[str, int] = {}
    last: tuple[int, str] | None = None
    for seq in seqs:
        fields, prev, digest = check_event(folder, seq, checkpoint, note)
        if last is not None and last[0] == seq - 1 and last[1] != prev:
            raise Failed(f"event {seq} does not follow event {seq - 1}: the chain is broken")
        last = (seq, digest)
        op = fields.get("operation_id")
        if operations and op not in operations:
            raise Failed(f"event {seq} is of operation {op!r}, which the bundle is not about")
        seen[str(op)] = seen.get(str(op), 0) + 1
        out.append(
            f"event {seq} ok: {fields.get('at')} {fields.get('kind')} "
            f"{'of ' + str(op) if op is not None else '(no operation)'} by {fields.get('actor')}"
        )
    for op in operations:
        if op not in seen:
            raise Failed(f"the bundle holds no event of operation {op!r}")
    span = claims.get("range")
    if span is not None and (
        not isinstance(span, list)
        or len(span) != 2
        or not all(isinstance(b, int) for b in span)
        or seqs != list(range(span[0], span[1] + 1))
    ):
        raise Failed(f"bundle.json claims events {span[0]}-{span[1]}, but lists others")
    out.append(f"bundle ok: {counted(len(seqs), 'event')} in {origin} at {counted(size, 'event')}")
    return out


def counted(n: int, word: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _key_text(key: str) -> str:
    """A vkey given as itself, or the text of the file holding it."""
    return key if "+" in key and not Path(key).is_file() else read_text(Path(key))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a flowledger auditor's bundle.")
    parser.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=Path(__file__).parent,
        help="the bundle's folder (default: the folder this script is in)",
    )
    parser.add_argument("--key", help="the log's key NAME+ID+BASE64, or a file holding it")
    parser.add_argument(
        "--witness",
        action="append",
        help="a witness's key NAME+ID+BASE64, or a file holding it (repeat; by default the "
        "bundle's witnesses.vkeys)",
    )
    parser.add_argument(
        "--quorum", type=int, help="how many of the witnesses must have cosigned (default: all)"
    )
    args = parser.parse_args(argv)
    try:
        key = args.key if args.key is not None else str(args.folder / "log.vkey")
        witnesses = None if args.witness is None else [_key_text(w) for w in args.witness]
        if args.quorum is not None and args.quorum < 0:
            raise Unreadable("--quorum is a number of witnesses, 0 or more")
        if args.quorum == 0:
            print("verify_bundle: --quorum 0 checks no witness's cosignature", file=sys.stderr)
        lines = verify(args.folder, _key_text(key), witnesses, args.quorum)
    except Unreadable as exc:
        print(f"verify_bundle: {exc}".encode("ascii", "backslashreplace").decode(), file=sys.stderr)
        return 2
    except Failed as exc:
        print(f"bundle FAILED: {exc}".encode("ascii", "backslashreplace").decode())
        return 1
    for line in lines:
        # What the bundle says, shown so a control or bidi character cannot disguise it.
        print(line.encode("ascii", "backslashreplace").decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
