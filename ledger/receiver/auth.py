"""Who may call what: bearer tokens, scopes per route, optional HMAC request signing.

``write`` may dispatch, prepare, confirm, fail and post hooks; ``read`` may read; ``operator``
may do both. A token created with signing must also send ``X-Flowledger-Signature:
t=<unix>,v2=<hex HMAC-SHA256 of "t.METHOD.PATH.body">`` (PATH as sent, with its query) within
the configured window, and each signature is accepted once: a captured request can neither be
sent again nor moved to another operation. ``v1`` signed only "t.body" and is refused. Nothing
here logs a header.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
from fastapi import Request
from starlette.types import Scope

from ledger.receiver.errors import ApiError
from ledger.receiver.state import ReceiverState, current
from ledger.receiver.tokens import Principal, signing_key
from ledger.writer import signatures

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, headers=_CHALLENGE)


def bearer(header: str | None) -> str:
    """The token in an ``Authorization: Bearer <token>`` header."""
    if not header:
        raise _unauthorized("missing_token", "send Authorization: Bearer <token>")
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("missing_token", "send Authorization: Bearer <token>")
    return token


def target(scope: Scope) -> bytes:
    """The request's method and path as sent, with its query: ``POST./v1/…?x=1`` (what a
    signature covers besides the time and the body)."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    path = raw.partition(b"?")[0]  # some servers' raw_path carries the query too
    query = scope.get("query_string", b"")
    return scope["method"].encode("ascii") + b"." + path + (b"?" + query if query else b"")


def check_signature(
    header: str | None, request: bytes, body: bytes, key: bytes, now: float, window: float
) -> tuple[str, int]:
    """The signature's hex digest and timestamp if ``header`` signs ``request`` (method and
    path, :func:`target`) and ``body`` with ``key`` within ``window`` seconds of ``now``."""
    if not header:
        raise _unauthorized("signature_required", "this token must sign its requests")
    parts: dict[str, str] = {}
    for piece in header.split(","):
        k, _, v = piece.strip().partition("=")
        parts[k] = v
    stamp, given = parts.get("t", ""), parts.get("v2", "")
    if not given and "v1" in parts:
        raise _unauthorized(
            "signature_upgrade",
            'v1 signatures (over "t.body") are refused; upgrade the client to sign v2 over '
            '"t.METHOD.PATH.body"',
        )
    well_formed = stamp.isascii() and stamp.isdigit() and given.isascii()
    if not well_formed or len(stamp) > 12 or not given:
        raise _unauthorized("bad_signature", "signature header must be t=<unix>,v2=<hex>")
    if abs(now - int(stamp)) > window:
        raise _unauthorized("stale_signature", "signature timestamp is outside the window")
    signed = stamp.encode() + b"." + request + b"." + body
    expected = hmac.new(key, signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.lower()):
        raise _unauthorized("bad_signature", "signature does not match the request")
    return expected, int(stamp)


async def authenticate(
    st: ReceiverState,
    scope: str,
    *,
    authorization: str | None,
    signature: str | None,
    request: bytes,
    body: bytes,
) -> Principal:
    """The principal of a request whose token's scope covers ``scope``; 401 or 403 if none."""
    token = bearer(authorization)
    if st.tokens.stale:
        async with st.token_reload:
            if st.tokens.stale:
                await anyio.to_thread.run_sync(st.tokens.reload)
    principal = st.tokens.find(token)
    if principal is None and st.tokens.worth_a_reload:
        async with st.token_reload:
            if st.tokens.worth_a_reload:
                await anyio.to_thread.run_sync(st.tokens.reload)
        principal = st.tokens.find(token)
    if principal is None:
        raise _unauthorized("unknown_token", "the token is unknown or revoked")
    if not principal.may(scope):
        raise ApiError(403, "forbidden", f"this route needs the {scope} scope")
    if principal.signing_salt is not None:
        if st.secret is None:
            raise _unauthorized(
                "signing_unavailable", "the receiver has no secret to check signatures with"
            )
        key = signing_key(st.secret, principal.signing_salt)
        digest, stamp = check_signature(
            signature, request, body, key, time.time(), st.signature_window
        )
        until = datetime.fromtimestamp(stamp + st.signature_window, UTC)
        fresh = await anyio.to_thread.run_sync(signatures.remember, st.store, digest, until)
        if not fresh:
            raise _unauthorized("replayed_signature", "this signed request was accepted before")
    return principal


def require(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency that admits a token whose scope covers ``scope``."""

    async def dependency(request: Request) -> Principal:
        headers = request.headers
        return await authenticate(
            current(request),
            scope,
            authorization=headers.get("authorization"),
            signature=headers.get("x-flowledger-signature"),
            request=target(request.scope),
            body=await request.body(),
        )

    return dependency
