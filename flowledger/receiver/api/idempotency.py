"""``Idempotency-Key`` as a request carries it: the header checked, the request's fingerprint,
and this process's set of keys being run (a second request with a running key is 409). What
a key then does, in the writer's transaction, is :mod:`flowledger.receiver.engine.idempotency`'s;
the workflow calls' routes and the hold routes both use it."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator

from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.schemas.fields import is_idempotency_key
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal

HEADER = "Idempotency-Key"


def key_of(header: str | None) -> str | None:
    """The ``Idempotency-Key`` header's value, checked; None when the request has none."""
    if header is None:
        return None
    if not is_idempotency_key(header):
        raise ApiError(422, "invalid_input", "1 to 200 visible ASCII characters", HEADER)
    return header


def request_hash(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


@contextlib.contextmanager
def running_key(st: ReceiverState, principal: Principal, key: str | None) -> Iterator[None]:
    """While a request with ``key`` runs: another with the same key and token is 409."""
    if key is None:
        yield
        return
    release = take_key(st, principal, key)
    try:
        yield
    finally:
        release()


def take_key(st: ReceiverState, principal: Principal, key: str) -> Callable[[], None]:
    """Mark ``key`` of ``principal``'s token running (409 if it is already): what to call once
    the request has its answer (:func:`running_key`, for a caller with no block to wrap)."""
    slot = (principal.token_id, key)
    if slot in st.in_flight:  # checked and taken with no await in between
        raise ApiError(409, "idempotency_in_flight", "a request with this key is running")
    st.in_flight.add(slot)
    return lambda: st.in_flight.discard(slot)
