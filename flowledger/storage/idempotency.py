"""Idempotency keys as the receiver's writer reads and writes them: in the writer's plain SQL
(the transaction's own cursor), so that they stay in a batch's pipeline on PostgreSQL. What a
key means (the same request gets its answer again) is
:mod:`flowledger.receiver.engine.idempotency`'s; removing the expired ones in bulk is
:mod:`flowledger.storage.keys`'s."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from flowledger.storage.tx import Tx

_STORED = (
    "SELECT request_hash, status, response_status, response_body, expires_at <= :now AS expired"
    " FROM idempotency_keys WHERE token_id = :token_id AND key = :key"
)
_FORGET = (
    "DELETE FROM idempotency_keys WHERE token_id = :token_id AND key = :key AND expires_at <= :now"
)
_STORE = (
    "INSERT INTO idempotency_keys (token_id, key, request_hash, status, response_status,"
    " response_body, created_at, expires_at) VALUES (:token_id, :key, :request_hash,"
    " 'completed', 200, :response_body, :created_at, :expires_at)"
)
_LOCK = "SELECT pg_try_advisory_xact_lock(:lock) AS got"
_ANSWER = "SELECT response_body FROM idempotency_keys WHERE token_id = :token_id AND key = :key"
_DROP = "DELETE FROM idempotency_keys WHERE token_id = :token_id AND key = :key"


def find(tx: Tx, token_id: int, key: str, now: Any) -> Any:
    """The key's row (``request_hash``, ``status``, ``response_status``, ``response_body``,
    ``expired`` as of ``now``, a bound time), or None."""
    return tx.one(_STORED, {"token_id": token_id, "key": key, "now": now})


def forget_expired(tx: Tx, token_id: int, key: str, now: Any) -> None:
    """Remove the key if it expired by ``now``."""
    tx.execute(_FORGET, {"token_id": token_id, "key": key, "now": now})


def store(
    tx: Tx,
    token_id: int,
    key: str,
    *,
    request_hash: str,
    response_body: str,
    created_at: Any,
    expires_at: Any,
) -> None:
    """Keep a completed request's answer under its key (times as bound)."""
    tx.execute(
        _STORE,
        {
            "token_id": token_id,
            "key": key,
            "request_hash": request_hash,
            "response_body": response_body,
            "created_at": created_at,
            "expires_at": expires_at,
        },
    )


def forget_answer(tx: Tx, token_id: int, key: str, operation_id: str) -> bool:
    """Remove the answer stored under the token's ``key`` if it is a ``go`` for
    ``operation_id`` (a released dispatch's, which a replay must not get again: it would pass
    on an item for an operation that is ``prepared``); True when one was removed."""
    row = tx.one(_ANSWER, {"token_id": token_id, "key": key})
    if row is None or row.response_body is None:
        return False
    try:
        stored = json.loads(row.response_body)
    except ValueError:
        return False
    if not isinstance(stored, dict) or stored.get("operation_id") != operation_id:
        return False
    if stored.get("decision") != "go":
        return False
    tx.execute(_DROP, {"token_id": token_id, "key": key})
    return True


def _advisory_key(token_id: int, key: str) -> int:
    raw = hashlib.sha256(f"idempotency\x00{token_id}\x00{key}".encode()).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


def lock(tx: Tx, token_id: int, key: str) -> bool:
    """PostgreSQL: take the key's transaction-scoped advisory lock, False when another
    transaction (another receiver) holds it. Elsewhere there is one writer: always True."""
    if tx.dialect != "postgresql":
        return True
    got = tx.one(_LOCK, {"lock": _advisory_key(token_id, key)})
    return got is not None and bool(got.got)
