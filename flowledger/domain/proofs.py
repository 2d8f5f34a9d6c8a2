"""Proof files: what ``flowledger proof`` writes and ``python -m flowledger.programs.verify_proof``
checks with no database, the standard library and ``cryptography`` only.

An inclusion proof holds a signed checkpoint and an operation's events, each with what its
chain hash covers (so the reader recomputes the hash) and its RFC 9162 audit path to the
checkpoint's root. A consistency proof holds two signed checkpoints of one ledger and the
proof that the older tree is a prefix of the newer. Hashes in the paths are base64, as in the
checkpoints.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from flowledger.domain import merkle
from flowledger.domain.checkpoints import Checkpoint, CheckpointError, VerifierKey, open_checkpoint
from flowledger.domain.cosignatures import cosignatures
from flowledger.domain.display import counted
from flowledger.domain.hashing import chain_hash

INCLUSION = "flowledger-inclusion-proof/1"
CONSISTENCY = "flowledger-consistency-proof/1"
# The fields of an event its chain hash covers, as the proof carries them ("at" written as
# the sealed form writes it).
SEALED = ("seq", "at", "actor", "kind", "operation_id", "hold_id", "data")


class ProofFailure(ValueError):
    """A proof file that does not prove what it claims; the message names what broke."""


def b64(values: list[bytes]) -> list[str]:
    return [base64.b64encode(v).decode() for v in values]


def inclusion_document(
    checkpoint_note: str, operation_id: str, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """``events``: each with :data:`SEALED`, ``prev_hash``, ``hash`` and ``inclusion``."""
    return {
        "format": INCLUSION,
        "checkpoint": checkpoint_note,
        "operation_id": operation_id,
        "events": events,
    }


def range_document(
    checkpoint_note: str, first: int, last: int, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The proof file of events ``first..last`` by their place in the log, whatever they
    concern (a token's creation, a source's hold, the first event of all)."""
    return {
        "format": INCLUSION,
        "checkpoint": checkpoint_note,
        "range": [first, last],
        "events": events,
    }


def consistency_document(old_note: str, new_note: str, proof: list[bytes]) -> dict[str, Any]:
    return {"format": CONSISTENCY, "old": old_note, "new": new_note, "consistency": b64(proof)}


@dataclass(frozen=True)
class Proven:
    """What a proof file proved, for the reader."""

    checkpoint: Checkpoint
    what: str
    cosigned_by: tuple[str, ...] = ()


def check(
    doc: Any, key: VerifierKey, witnesses: Sequence[VerifierKey] = (), quorum: int = 0
) -> Proven:
    """Check a proof file's content (parsed JSON) against ``key`` and, with ``quorum``, that
    at least that many of ``witnesses`` cosigned the checkpoint it proves against (the newer
    one of a consistency proof); :class:`ProofFailure` says what broke."""
    if not isinstance(doc, dict):
        raise ProofFailure("not a proof file: its JSON is not an object")
    kind = doc.get("format")
    if kind == INCLUSION:
        proven, note = _check_inclusion(doc, key), doc["checkpoint"]
    elif kind == CONSISTENCY:
        proven, note = _check_consistency(doc, key), doc["new"]
    else:
        raise ProofFailure(
            f"not a proof file: format {kind!r} is neither {INCLUSION} nor {CONSISTENCY}"
        )
    try:
        found = cosignatures(note, witnesses)
    except CheckpointError as exc:
        raise ProofFailure(f"a cosignature: {exc}") from None
    if len(found) < quorum:
        lacking = [w.name for w in witnesses if w not in {c.witness for c in found}]
        raise ProofFailure(
            f"the checkpoint is cosigned by {len(found)} of the witnesses given, "
            f"{quorum} required: missing {', '.join(lacking)}"
            + (f" (cosigned by {', '.join(c.witness.name for c in found)})" if found else "")
        )
    return replace(proven, cosigned_by=tuple(c.witness.name for c in found))


def _checkpoint(doc: dict[str, Any], field: str, key: VerifierKey) -> Checkpoint:
    note = doc.get(field)
    if not isinstance(note, str):
        what = "checkpoint" if field == "checkpoint" else f"{field} checkpoint"
        raise ProofFailure(f"the proof file has no {what}")
    try:
        return open_checkpoint(note, key)
    except CheckpointError as exc:
        raise ProofFailure(f"{field}: {exc}") from None


def _hashes(values: Any, what: str) -> list[bytes]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ProofFailure(f"{what} is not a list of base64 hashes")
    try:
        out = [base64.b64decode(v, validate=True) for v in values]
    except binascii.Error:
        raise ProofFailure(f"{what} holds a hash that is not base64") from None
    if any(len(h) != 32 for h in out):
        raise ProofFailure(f"{what} holds a hash that is not 32 bytes")
    return out


def _range(doc: dict[str, Any]) -> tuple[int, int] | None:
    """The events ``first..last`` a proof by place claims, or ``None`` for an operation's."""
    if "range" not in doc:
        return None
    bounds = doc["range"]
    if (
        not isinstance(bounds, list)
        or len(bounds) != 2
        or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
        or not 1 <= bounds[0] <= bounds[1]
    ):
        raise ProofFailure("the proof file's range is not two event numbers FIRST <= LAST")
    return bounds[0], bounds[1]


def _check_inclusion(doc: dict[str, Any], key: VerifierKey) -> Proven:
    cp = _checkpoint(doc, "checkpoint", key)
    operation_id, events = doc.get("operation_id"), doc.get("events")
    span = _range(doc)
    if not isinstance(events, list) or not events:
        raise ProofFailure("the proof file holds no events")
    if span is not None and len(events) != span[1] - span[0] + 1:
        raise ProofFailure(
            f"the proof file claims events {span[0]}-{span[1]} but holds "
            f"{counted(len(events), 'event')}"
        )
    for place, ev in enumerate(events):
        if not isinstance(ev, dict) or not all(f in ev for f in (*SEALED, "prev_hash", "hash")):
            raise ProofFailure(f"an event lacks one of {', '.join(SEALED)}, prev_hash, hash")
        seq = ev["seq"]
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
            raise ProofFailure(f"an event's seq {seq!r} is not a sequence number")
        if span is not None and seq != span[0] + place:
            raise ProofFailure(f"event {seq} is not event {span[0] + place} of the range")
        if span is None and ev["operation_id"] != operation_id:
            raise ProofFailure(f"event {seq} is of operation {ev['operation_id']!r}, not this one")
        if not isinstance(ev["prev_hash"], str) or not isinstance(ev["hash"], str):
            raise ProofFailure(f"event {seq}: prev_hash and hash must be hex text")
        try:
            recomputed = chain_hash(ev["prev_hash"], {f: ev[f] for f in SEALED})
        except (TypeError, ValueError):
            raise ProofFailure(f"event {seq}: its fields cannot be sealed") from None
        if recomputed != ev["hash"]:
            raise ProofFailure(
                f"event {seq}: its content does not match its hash: the event was altered"
            )
        if seq > cp.size:
            raise ProofFailure(
                f"event {seq} is beyond the checkpoint's {counted(cp.size, 'event')}"
            )
        try:
            leaf = merkle.event_leaf(ev["hash"])
        except ValueError:
            raise ProofFailure(f"event {seq}: its hash is not hex") from None
        path = _hashes(ev.get("inclusion"), f"event {seq}'s inclusion proof")
        try:
            merkle.verify_inclusion(seq - 1, cp.size, leaf, path, cp.root)
        except merkle.ProofError as exc:
            raise ProofFailure(
                f"event {seq} is not in the log the checkpoint signs ({exc}): the event, or "
                "the log before it, was changed or removed since"
            ) from None
    if span is not None:
        return Proven(cp, f"events {span[0]}-{span[1]} of the log")
    return Proven(cp, f"{counted(len(events), 'event')} of operation {operation_id!r}")


def _check_consistency(doc: dict[str, Any], key: VerifierKey) -> Proven:
    old, new = _checkpoint(doc, "old", key), _checkpoint(doc, "new", key)
    if old.origin != new.origin:
        raise ProofFailure(f"the checkpoints are of two logs: {old.origin} and {new.origin}")
    if new.size < old.size:
        raise ProofFailure(
            f"the new checkpoint ({new.size} events) is smaller than the old ({old.size}): "
            "the log was truncated"
        )
    path = _hashes(doc.get("consistency"), "the consistency proof")
    try:
        merkle.verify_consistency(old.size, new.size, old.root, new.root, path)
    except merkle.ProofError as exc:
        raise ProofFailure(
            f"the new checkpoint does not extend the old ({exc}): the log was forked, or "
            f"events up to {old.size} were rewritten or removed"
        ) from None
    return Proven(new, f"the log at {counted(old.size, 'event')} is a prefix of it")
