"""What a witness checks before it cosigns (C2SP ``tlog-witness``, ``add-checkpoint``), as pure
functions: the request body (``old <size>``, up to 63 consistency-proof hashes, a blank line,
the signed checkpoint), the log's signature, and the consistency of the new checkpoint with
the latest one it cosigned. Each refusal carries the HTTP status the spec gives it, so the
server only maps it. No I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flowledger.domain import merkle
from flowledger.domain.checkpoints import (
    MAX_SIZE,
    BadSignature,
    Checkpoint,
    CheckpointError,
    VerifierKey,
    open_note,
    parse_checkpoint,
    split_note,
)

SIZE_TYPE = "text/x.tlog.size"  # the Content-Type of a 409's body
MAX_PROOF = 63
MAX_BODY = 128 * 1024  # a checkpoint with 16 post-quantum signatures fits, with room
_OLD = re.compile(r"^old (0|[1-9][0-9]{0,18})$")


@dataclass(frozen=True)
class Submission:
    """An ``add-checkpoint`` request: the size the client believes the witness holds, the
    consistency proof from it, and the signed checkpoint."""

    old: int
    proof: list[bytes]
    note: str

    def body(self) -> bytes:
        lines = [f"old {self.old}", *(base64.b64encode(h).decode() for h in self.proof)]
        return ("\n".join(lines) + "\n\n" + self.note).encode()


@dataclass
class Refused(Exception):
    """The witness will not cosign: the status to answer, why, and (for 409) its size."""

    status: int
    reason: str
    size: int | None = field(default=None)

    def __str__(self) -> str:
        return self.reason


def parse_submission(body: bytes) -> Submission:
    """The request ``body``; a malformed one is :class:`Refused` with 400."""
    if len(body) > MAX_BODY:
        raise Refused(413, f"the request body is over {MAX_BODY} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(400, "the request body is not UTF-8") from None
    head, sep, note = text.partition("\n\n")
    if not sep:
        raise Refused(400, "no blank line between the old size and proof and the checkpoint")
    lines = head.split("\n")
    found = _OLD.match(lines[0])
    if not found or int(found.group(1)) > MAX_SIZE:
        raise Refused(400, "the first line must be `old <size>`, the size in plain decimal")
    if len(lines) - 1 > MAX_PROOF:
        raise Refused(400, f"a consistency proof of more than {MAX_PROOF} hashes")
    proof = []
    for n, line in enumerate(lines[1:], 1):
        try:
            digest = base64.b64decode(line, validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != 32:
            raise Refused(400, f"proof line {n} is not a 32-byte hash in base64")
        proof.append(digest)
    return Submission(int(found.group(1)), proof, note)


def check_submission(
    sub: Submission, logs: Mapping[str, Sequence[VerifierKey]], latest: Checkpoint | None
) -> Checkpoint:
    """The checkpoint ``sub`` brings, once the witness may cosign it: signed by a key it
    trusts for its origin (``logs``, origin to keys), and consistent with ``latest``, the
    checkpoint it last cosigned for that origin (``None``: never). Otherwise
    :class:`Refused` with the status tlog-witness gives."""
    try:
        text, _ = split_note(sub.note)
        cp = parse_checkpoint(text, empty_root=False)
    except CheckpointError as exc:
        raise Refused(400, f"the checkpoint: {exc}") from None
    keys = logs.get(cp.origin)
    if not keys:
        raise Refused(404, f"this witness does not know the log {cp.origin[:200]!r}")
    _signed(sub.note, keys)
    if sub.old > cp.size:
        raise Refused(400, f"old size {sub.old} is above the checkpoint's size {cp.size}")
    held = latest.size if latest is not None else 0
    if sub.old != held:
        raise Refused(409, f"this witness holds size {held}, not {sub.old}", held)
    if cp.size == 0 and cp.root != merkle.EMPTY_ROOT:
        raise Refused(422, "a checkpoint of size 0 must carry the empty tree's root")
    if sub.old == 0:
        if sub.proof:
            raise Refused(422, "a proof from size 0 must be empty")
        return cp
    assert latest is not None
    try:
        merkle.verify_consistency(latest.size, cp.size, latest.root, cp.root, sub.proof)
    except merkle.ProofError as exc:
        raise Refused(
            422, f"the checkpoint is not consistent with size {latest.size}: {exc}"
        ) from None
    return cp


def _signed(note: str, keys: Sequence[VerifierKey]) -> None:
    """:class:`Refused` 403 unless a key of ``keys`` signed ``note`` and none that signed it
    fails to verify."""
    verified = False
    for key in keys:
        try:
            open_note(note, key)
            verified = True
        except BadSignature as exc:
            raise Refused(403, str(exc)) from None
        except CheckpointError:
            continue  # not signed by this key
    if not verified:
        raise Refused(403, "the checkpoint is not signed by a key this witness trusts for it")
