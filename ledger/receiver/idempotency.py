"""``Idempotency-Key``: the same key and body get the stored answer again.

The stored answer is written in the same savepoint as the change it answers, so a crash keeps
both or neither; nothing marks a key "in flight" in the database (a crash would leave such a
mark behind and refuse the client's retries until expiry). Instead a key being run is refused
with 409 by this process's set of running keys, and, on PostgreSQL where several receivers
share the database, by a transaction-scoped advisory lock on the key. Keys are scoped per
token and expire after the configured time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from fastapi import Request
from fastapi.responses import Response

from ledger.models import IdempotencyKey, table
from ledger.receiver.committer import commit
from ledger.receiver.errors import ApiError, as_api_error
from ledger.receiver.state import ReceiverState
from ledger.receiver.tokens import Principal
from ledger.services import Answer, Tx

KEYS = table(IdempotencyKey)
HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
JSON = "application/json"


@dataclass(frozen=True)
class Reply:
    """An answer's status and exact body bytes; ``replayed`` when it came from storage."""

    status: int
    body: bytes
    value: Any = None
    replayed: bool = False

    def response(self) -> Response:
        headers = {REPLAYED: "true"} if self.replayed else None
        return Response(self.body, self.status, headers=headers, media_type=JSON)


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def key_of(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= 200 or not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise ApiError(422, "invalid_input", "1 to 200 visible ASCII characters", HEADER)
    return key


def request_hash(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def _advisory_key(token_id: int, key: str) -> int:
    raw = hashlib.sha256(f"idempotency\x00{token_id}\x00{key}".encode()).digest()[:8]
    return int.from_bytes(raw, "big", signed=True)


def keyed(
    work: Callable[[Tx], Any],
    render: Callable[[Any], Any],
    *,
    token_id: int,
    key: str,
    fingerprint: str,
    ttl: timedelta,
) -> Callable[[Tx], Reply]:
    """``work`` wrapped so that its answer is stored under the key, or the stored one
    returned, in the same transaction."""

    def unit(tx: Tx) -> Reply:
        where = (KEYS.c.token_id == token_id, KEYS.c.key == key)
        row = tx.conn.execute(sa.select(KEYS).where(*where)).first()
        if row is not None and row.expires_at <= tx.now:
            tx.conn.execute(KEYS.delete().where(*where))
            row = None
        if row is not None:
            if row.request_hash != fingerprint:
                raise ApiError(
                    422,
                    "idempotency_key_reused",
                    "this Idempotency-Key was used with a different request",
                    HEADER,
                )
            if row.status != "completed" or row.response_body is None:
                raise ApiError(409, "idempotency_in_flight", "a request with this key is running")
            return Reply(row.response_status, row.response_body.encode(), replayed=True)
        if tx.conn.dialect.name == "postgresql":
            got = tx.conn.execute(
                sa.select(sa.func.pg_try_advisory_xact_lock(_advisory_key(token_id, key)))
            ).scalar_one()
            if not got:
                raise ApiError(409, "idempotency_in_flight", "a request with this key is running")
        value = work(tx)
        body = dumps(render(value))
        tx.conn.execute(
            KEYS.insert().values(
                token_id=token_id,
                key=key,
                request_hash=fingerprint,
                status="completed",
                response_status=200,
                response_body=body.decode(),
                created_at=tx.now,
                expires_at=tx.now + ttl,
            )
        )
        return Reply(200, body, value)

    return unit


def _render(value: Any) -> Any:
    return value.as_dict() if isinstance(value, Answer) else value


async def answer(
    st: ReceiverState,
    request: Request,
    principal: Principal,
    work: Callable[[Tx], Any],
    render: Callable[[Any], Any] = _render,
) -> Reply:
    """Run ``work`` through the writer, honouring an ``Idempotency-Key``; map errors."""
    key = key_of(request)
    if key is None:
        try:
            value = await commit(st.committer, principal.actor, work)
        except Exception as exc:
            raise as_api_error(exc) from None
        return Reply(200, dumps(render(value)), value)
    fingerprint = request_hash(request.method, request.url.path, await request.body())
    slot = (principal.token_id, key)
    if slot in st.in_flight:  # checked and taken with no await in between
        raise ApiError(409, "idempotency_in_flight", "a request with this key is running")
    unit = keyed(
        work,
        render,
        token_id=principal.token_id,
        key=key,
        fingerprint=fingerprint,
        ttl=timedelta(seconds=st.idempotency_ttl),
    )
    st.in_flight.add(slot)
    try:
        reply: Reply = await commit(st.committer, principal.actor, unit)
    except Exception as exc:
        raise as_api_error(exc) from None
    finally:
        st.in_flight.discard(slot)
    return reply


def purge_expired(tx: Tx, limit: int = 1000) -> int:
    """Delete up to ``limit`` expired keys (run now and then by the receiver)."""
    ids = tx.conn.execute(
        sa.select(KEYS.c.token_id, KEYS.c.key).where(KEYS.c.expires_at <= tx.now).limit(limit)
    ).all()
    for token_id, key in ids:
        tx.conn.execute(KEYS.delete().where(KEYS.c.token_id == token_id, KEYS.c.key == key))
    return len(ids)
