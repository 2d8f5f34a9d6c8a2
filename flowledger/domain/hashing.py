"""Canonical JSON, input hashes and the event chain's hash: pure functions, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from flowledger.domain.limits import is_valid_hash

__all__ = ["GENESIS_HASH", "canonical_json", "chain_hash", "input_hash", "is_valid_hash", "seal"]
GENESIS_HASH = "0" * 64


# One encoder for every call: ``json.dumps`` with options builds a new one each time.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8; NaN and infinities are refused (they have no JSON)."""
    return _CANONICAL.encode(value).encode("utf-8")


def input_hash(value: Any, secret: bytes | None = None) -> str:
    """``sha256:<hex>`` of the canonical input, or its HMAC when the ledger has a secret.

    A bare hash of a low-entropy input (an e-mail address, an amount) can be guessed by
    hashing candidates; the keyed form cannot without the secret.
    """
    body = canonical_json(value)
    if secret:
        return "hmac-sha256:" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def seal(prev_hash: str, canonical_event: bytes) -> str:
    """``sha256(prev_hash ‖ canonical event)``: each event seals the one before it. The writer
    passes the event's canonical JSON as it builds it for storage (encoded once)."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical_event).hexdigest()


def chain_hash(prev_hash: str, event: dict[str, Any]) -> str:
    """:func:`seal` over the canonical JSON of ``event`` (what the verifier recomputes)."""
    return seal(prev_hash, canonical_json(event))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
