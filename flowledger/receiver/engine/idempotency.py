"""``Idempotency-Key``: the same key and body get the stored answer again.

The stored answer is written in the same savepoint as the change it answers, so a crash keeps
both or neither; nothing marks a key "in flight" in the database (a crash would leave such a
mark behind and refuse the client's retries until expiry). Instead a key being run is refused
with 409 by this process's set of running keys, and, on PostgreSQL where several receivers
share the database, by a transaction-scoped advisory lock on the key. Keys are scoped per
token and expire after the configured time.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from json.encoder import encode_basestring_ascii
from typing import Any

from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.idempotency import HEADER
from flowledger.receiver.api.reply import Reply, dumps
from flowledger.services.ledger import Answer, Tx
from flowledger.storage import idempotency as stored_keys


def _render(value: Any) -> Any:
    return value.as_dict() if isinstance(value, Answer) else value


def _text(value: str | None) -> str:
    return "null" if value is None else encode_basestring_ascii(value)


def answer_json(answer: Answer) -> bytes:
    """``dumps(answer.as_dict())``, the same bytes written field by field (sorted, ASCII):
    the encoder's general walk cost 9.5 us an answer against 1.5 us (bench/README.md,
    "Receiver engine"), and every call is answered so. Anything but the usual types goes the
    general way."""
    a = answer
    if (
        type(a.attempt) is not int
        or not (a.hold_id is None or type(a.hold_id) is int)
        or not all(v is None or type(v) is str for v in (a.decision, a.reason, a.receipt))
    ):
        return dumps(a.as_dict())
    hold_id = "null" if a.hold_id is None else a.hold_id
    return (
        f'{{"attempt":{a.attempt},"decision":{_text(a.decision)},"hold_id":{hold_id},'
        f'"operation_id":{encode_basestring_ascii(a.operation_id)},"reason":{_text(a.reason)},'
        f'"receipt":{_text(a.receipt)},"state":{encode_basestring_ascii(a.state)}}}'
    ).encode()


def _body(value: Any, render: Callable[[Any], Any]) -> bytes:
    if render is _render and type(value) is Answer:
        return answer_json(value)
    return dumps(render(value))


def settled(value: Any) -> Reply:
    """The answer to a unit that returned ``value``: a keyed unit's own, or ``value``'s."""
    return value if isinstance(value, Reply) else Reply(200, _body(value, _render), value)


def keyed(
    work: Callable[[Tx], Any],
    render: Callable[[Any], Any] = _render,
    *,
    token_id: int,
    key: str,
    fingerprint: str,
    ttl: timedelta,
) -> Callable[[Tx], Reply]:
    """``work`` wrapped so that its answer is stored under the key, or the stored one
    returned, in the same transaction.

    The stored key is read before anything is written, so a key in use (409) or reused
    with another request (422) is refused with nothing written: the group commit refuses
    such a unit alone, where a write ahead of the refusal (the removal of an expired key,
    then made first whatever the key's age) ran its whole batch again with a savepoint per
    unit. The statements (:mod:`flowledger.storage.idempotency`) are the writer's plain SQL,
    which keeps them in the batch's pipeline on PostgreSQL."""

    def unit(tx: Tx) -> Reply:
        row = stored_keys.find(tx, token_id, key, tx.db_now)
        if row is not None and row.expired:
            # An expired key counts as never used: remove it, so that this use can store its
            # own; read again, in case another receiver stored its own meanwhile.
            stored_keys.forget_expired(tx, token_id, key, tx.db_now)
            row = stored_keys.find(tx, token_id, key, tx.db_now)
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
        if not stored_keys.lock(tx, token_id, key):
            raise ApiError(409, "idempotency_in_flight", "a request with this key is running")
        value = work(tx)
        body = _body(value, render)
        stored_keys.store(
            tx,
            token_id,
            key,
            request_hash=fingerprint,
            response_body=body.decode(),
            created_at=tx.db_now,
            expires_at=tx.time(tx.now + ttl),
        )
        return Reply(200, body, value)

    return unit
