"""Who may call what: bearer tokens, scopes per route, optional HMAC request signing.

``write`` may dispatch, prepare, confirm, fail and post hooks; ``read`` may read; ``operator``
may do both. A token created with signing must also send ``X-Flowledger-Signature:
t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`` within the configured window. Nothing here logs a
header.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable

import anyio
from fastapi import Request

from ledger.receiver.errors import ApiError
from ledger.receiver.state import ReceiverState, current
from ledger.receiver.tokens import Principal, signing_key

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


def check_signature(header: str | None, body: bytes, key: bytes, now: float, window: float) -> None:
    if not header:
        raise _unauthorized("signature_required", "this token must sign its requests")
    parts: dict[str, str] = {}
    for piece in header.split(","):
        k, _, v = piece.strip().partition("=")
        parts[k] = v
    stamp, given = parts.get("t", ""), parts.get("v1", "")
    well_formed = stamp.isascii() and stamp.isdigit() and given.isascii()
    if not well_formed or len(stamp) > 12 or not given:
        raise _unauthorized("bad_signature", "signature header must be t=<unix>,v1=<hex>")
    if abs(now - int(stamp)) > window:
        raise _unauthorized("stale_signature", "signature timestamp is outside the window")
    expected = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.lower()):
        raise _unauthorized("bad_signature", "signature does not match the body")


async def authenticate(
    st: ReceiverState,
    scope: str,
    *,
    authorization: str | None,
    signature: str | None,
    body: bytes,
) -> Principal:
    """The principal of a request whose token's scope covers ``scope``; 401 or 403 if none."""
    token = bearer(authorization)
    if st.tokens.stale:
        async with st.token_reload:
            if st.tokens.stale:
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
        check_signature(signature, body, key, time.time(), st.signature_window)
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
            body=await request.body(),
        )

    return dependency
