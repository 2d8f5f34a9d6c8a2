"""Canonical JSON, input hashes and the event chain's hash: pure functions, no I/O."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from flowledger.domain.limits import is_valid_hash

__all__ = [
    "GENESIS_HASH",
    "canonical_json",
    "chain_hash",
    "genesis_hash",
    "input_hash",
    "is_valid_hash",
    "seal",
]
# The genesis every ledger made before ledger identities began from: shared by all of them, so
# it tells no ledger from another (a ledger that had events then keeps it; its chain is not
# rewritten).
GENESIS_HASH = "0" * 64


def genesis_hash(ledger_id: str) -> str:
    """The hash a ledger's chain starts from: its identity's, so that no two ledgers' chains
    share a prefix and a head of one is never a head of another."""
    return hashlib.sha256(b"flowledger genesis\n" + ledger_id.encode("utf-8")).hexdigest()


def is_genesis_of(ledger_id: str, genesis: str) -> bool:
    """Whether ``genesis`` is one a ledger of this identity may start from: its own, or the
    shared one of a ledger that had events before identities began."""
    return genesis in (genesis_hash(ledger_id), GENESIS_HASH)


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
