"""Canonical JSON, input hashes and the event chain's hash: pure functions, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

HASH_PATTERN = re.compile(r"^(sha256|hmac-sha256):[0-9a-f]{64}$")
GENESIS_HASH = "0" * 64


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8; NaN and infinities are refused (they have no JSON)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def input_hash(value: Any, secret: bytes | None = None) -> str:
    """``sha256:<hex>`` of the canonical input, or its HMAC when the ledger has a secret.

    A bare hash of a low-entropy input (an e-mail address, an amount) can be guessed by
    hashing candidates; the keyed form cannot without the secret.
    """
    body = canonical_json(value)
    if secret:
        return "hmac-sha256:" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def is_valid_hash(value: str) -> bool:
    return bool(HASH_PATTERN.match(value))


def chain_hash(prev_hash: str, event: dict[str, Any]) -> str:
    """``sha256(prev_hash ‖ canonical event)``: each event seals the one before it."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical_json(event)).hexdigest()


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
