"""Who may call what: bearer tokens, scopes per route, optional HMAC request signing.

``write`` may dispatch, prepare, confirm, fail and post hooks; ``read`` may read; ``operator``
may do both, and alone take a person's actions on holds (``/v1/holds/{id}/<action>``).
A token created with signing must also send ``X-Flowledger-Signature:
t=<unix>,v2=<hex HMAC-SHA256 of "t.METHOD.PATH.body">`` (PATH as sent, with its query) within
the configured window, and each signature is accepted once: a captured request can neither be
sent again nor moved to another operation. ``v1`` signed only "t.body" and is refused. Nothing
here logs a header.

A request is checked in two steps: :func:`admit` on its headers alone (token, scope, and the
signature header's presence, form and time), then, once the body is read, :func:`check_body`
(the signature against method, path and body). Nobody without a valid token makes the
receiver read a body. A signature that matches is recorded (once, or 401
``replayed_signature``) in the same transaction as the write it authorises: :func:`check_body`
hands back the guard that the group commit runs ahead of the request's unit of work. A read
has no write of its own; its guard goes through the group commit with nothing behind it, so
many requests' records still share one commit.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flowledger.receiver.api.errors import ApiError, unavailable
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal, signing_key
from flowledger.storage import signatures
from flowledger.storage.tx import Tx
from flowledger.storage.unit_of_work import Verdict

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


def target(scope: Mapping[str, Any]) -> bytes:
    """The request's method and path as sent, with its query: ``POST./v1/…?x=1`` (what a
    signature covers besides the time and the body)."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    path = raw.partition(b"?")[0]  # some servers' raw_path carries the query too
    query = scope.get("query_string", b"")
    return scope["method"].encode("ascii") + b"." + path + (b"?" + query if query else b"")


def signature_parts(header: str | None, now: float, window: float) -> tuple[str, str]:
    """The timestamp and digest of a signature header that is present, well formed and
    within ``window`` seconds of ``now``: everything about it that the body does not decide,
    so that it is checked before the body is read."""
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
    return stamp, given


def signature_matches(stamp: str, given: str, request: bytes, body: bytes, key: bytes) -> str:
    """The signature's hex digest if ``given`` signs ``stamp``, ``request`` (method and path,
    :func:`target`) and ``body`` with ``key``."""
    signed = stamp.encode() + b"." + request + b"." + body
    expected = hmac.new(key, signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, given.lower()):
        raise _unauthorized("bad_signature", "signature does not match the request")
    return expected


@dataclass(frozen=True)
class Admission:
    """A request let in on its headers alone: its token's principal and, for a token that
    signs, the signature still to be checked against the body (:func:`check_body`)."""

    principal: Principal
    key: bytes | None = None  # the signing key, when the token signs
    stamp: str = ""
    given: str = ""


async def admit(
    st: ReceiverState, scope: str, *, authorization: str | None, signature: str | None
) -> Admission:
    """Check what the headers decide (the token, its scope, the signature header's presence,
    form and time) before a byte of the body is read: an unauthenticated request is refused
    (401/403) without the receiver reading or holding its body."""
    token = bearer(authorization)
    if st.tokens.stale:
        # A database that does not answer within the read deadline leaves the list as it
        # was: a token known a moment ago goes on to its write (which has its own deadline).
        with contextlib.suppress(TimeoutError):
            await st.token_reload.within(st.read_deadline)
    principal = st.tokens.find(token)
    if principal is None and st.tokens.worth_a_reload:
        try:
            await st.token_reload.within(st.read_deadline)
        except TimeoutError:
            raise unavailable("the ledger's database did not answer; retry later") from None
        principal = st.tokens.find(token)
    return _admitted(st, scope, principal, signature)


def admit_now(
    st: ReceiverState, scope: str, *, authorization: str | None, signature: str | None
) -> Admission | None:
    """:func:`admit` without waiting: None when it would first reload the tokens (the cache
    is stale, or a miss is worth a reload), for the caller to :func:`admit` instead."""
    token = bearer(authorization)
    if st.tokens.stale:
        return None
    principal = st.tokens.find(token)
    if principal is None and st.tokens.worth_a_reload:
        return None
    return _admitted(st, scope, principal, signature)


def _admitted(
    st: ReceiverState, scope: str, principal: Principal | None, signature: str | None
) -> Admission:
    if principal is None:
        raise _unauthorized("unknown_token", "the token is unknown or revoked")
    if not principal.may(scope):
        raise ApiError(403, "forbidden", f"this route needs the {scope} scope")
    if principal.signing_salt is None:
        return Admission(principal)
    if st.secret is None:
        raise _unauthorized(
            "signing_unavailable", "the receiver has no secret to check signatures with"
        )
    stamp, given = signature_parts(signature, time.time(), st.signature_window)
    return Admission(principal, signing_key(st.secret, principal.signing_salt), stamp, given)


def check_body(
    st: ReceiverState, admission: Admission, request: bytes, body: bytes
) -> tuple[Principal, Once | None]:
    """The admitted principal once its signature (if it signs) matches the request and the
    body (401 otherwise), and the guard that records the signature once, for the group
    commit to run with the request's unit (None for a token that does not sign)."""
    if admission.key is None:
        return admission.principal, None
    digest = signature_matches(admission.stamp, admission.given, request, body, admission.key)
    until = datetime.fromtimestamp(int(admission.stamp) + st.signature_window, UTC)
    return admission.principal, Once(digest, until)


@dataclass(frozen=True)
class Once:
    """A guard recording signature ``digest`` (until ``until``): 401 ``replayed_signature``
    when it was recorded before, by this receiver or another on the same database. Data, not
    a closure, so that it can be handed to the writer process."""

    digest: str
    until: datetime

    def __call__(self, tx: Tx) -> Verdict:
        new = signatures.record(tx, self.digest, self.until)

        def verdict() -> None:
            if not new():
                raise _unauthorized("replayed_signature", "this signed request was accepted before")

        return verdict
