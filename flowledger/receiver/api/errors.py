"""One error shape for every failure: ``{"error": {"code", "message", "field"}}``. No web
framework here: the writer process maps its errors with this module too; FastAPI's handlers
that answer in this shape are :mod:`flowledger.receiver.api.handlers`.

Domain errors map to HTTP codes here and nowhere else: ``IllegalTransition`` -> 409,
``NotFound`` -> 404, ``InvalidInput`` -> 422. Messages never echo a raw input value (pydantic's
``input`` is dropped), and an unexpected exception is logged by class name only: a driver's
message can carry SQL parameters.

Anything else (the database unreachable or restarting, a lost connection, a commit whose end
is unknown) is ``503 unavailable`` with ``Retry-After``, never a 500: nothing was answered as
done, and the same request sent again (with its ``Idempotency-Key``) is safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from flowledger.domain import IllegalTransition
from flowledger.receiver.api.schemas.errors import ErrorPublic
from flowledger.services.ledger import InvalidInput, NotFound

log = logging.getLogger("flowledger.receiver")
INVALID_JSON = "the body is not valid JSON (malformed, or nested too deeply)"
RETRY_AFTER = "2"  # seconds a client is asked to wait after a 503 (a database restart)
LOG_EVERY = 30.0  # seconds between two log lines about the same kind of failure


class _Throttled:
    """One log line per kind of failure every :data:`LOG_EVERY` seconds, saying how many
    requests it stands for: a database outage under load would otherwise log one line per
    request, hundreds a second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def failed(self, kind: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -LOG_EVERY) < LOG_EVERY:
                self._quiet[kind] = self._quiet.get(kind, 0) + 1
                return
            self._last[kind] = now
            quiet = self._quiet.pop(kind, 0)
        more = f" ({quiet} more since the last line)" if quiet else ""
        log.error("request failed: %s; answered 503 with Retry-After%s", kind, more)


_failures = _Throttled()


class ApiError(Exception):
    """An answer other than 200, raised anywhere in a request."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def as_api_error(exc: BaseException) -> ApiError:
    """The HTTP answer for an exception raised by the services."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, IllegalTransition):
        return ApiError(409, exc.code, str(exc))
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc))
    if isinstance(exc, InvalidInput):
        return ApiError(422, "invalid_input", str(exc), exc.field)
    _failures.failed(type(exc).__name__)
    return unavailable("the ledger could not complete the request; retry later")


def unavailable(message: str, code: str = "unavailable") -> ApiError:
    """503 with ``Retry-After``: the ledger cannot answer now (its database is down, say)."""
    return ApiError(503, code, message, headers={"Retry-After": RETRY_AFTER})


def late_write(seconds: float) -> ApiError:
    """503 for a write not answered within the write deadline: its outcome is unknown."""
    _failures.failed("write deadline passed")
    return unavailable(
        f"the ledger's database did not answer within {seconds:g} s; the call may or may "
        "not have been written: retry it (with the same Idempotency-Key)"
    )


# What each error status means on the routes that can answer it, with its ``code`` values.
_MEANINGS = {
    400: "`invalid_json`: the body is not JSON; `duplicate_key`: an object in it has a key "
    "twice; `byte_order_mark`: it starts with one; `invalid_utf8`: it is not UTF-8 (UTF-16, "
    "say); `unsupported_charset`: the Content-Type names a charset other than UTF-8; "
    "`unsupported_content_encoding`: a Content-Encoding (gzip…), which is not decoded; "
    "`incomplete_body`: the client left mid-body",
    401: "`missing_token`, `unknown_token` (unknown or revoked); for a token that signs: "
    "`signature_required`, `bad_signature`, `stale_signature` (outside the window), "
    "`replayed_signature` (accepted before), `signature_upgrade` (a v1 signature), "
    "`signing_unavailable` (the receiver has no secret)",
    403: "`forbidden`: the token's scope does not cover this route",
    404: "`not_found`: no such operation or hold (or route)",
    405: "`method_not_allowed`: another method; the `Allow` header names the right one",
    408: "`body_timeout`: the body did not arrive within `body_timeout`; the connection is closed",
    409: "an illegal transition (its code names it), or `idempotency_in_flight`",
    413: "`body_too_large`: the body (or its Content-Length) is over `body_limit`; the "
    "connection is closed",
    415: "`unsupported_media_type`: a body that is not `application/json`",
    422: "`invalid_input`, `invalid_id`, `missing_field`, `unknown_field`, `too_long`, or "
    "`idempotency_key_reused`; `field` names the culprit",
    429: "`too_many_connections`: this client address already holds "
    "`max_connections_per_client` connections or requests at once; the connection is closed",
    503: "`unavailable`: the database could not complete the request, or did not answer "
    "within the write deadline; retry later (with the same `Idempotency-Key`)",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route that can answer ``statuses``: each with the one
    error shape (:class:`~flowledger.receiver.api.schemas.ErrorPublic`) and what it means."""
    return {status: {"model": ErrorPublic, "description": _MEANINGS[status]} for status in statuses}


def _field(loc: tuple[Any, ...]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "path", "query", "header")]
    return ".".join(parts) or (str(loc[0]) if loc else None)


_NOT_AN_OBJECT = frozenset({"model_type", "model_attributes_type", "dict_type"})


def _validation_code(err: dict[str, Any]) -> str:
    kind = str(err.get("type", ""))
    if kind == "json_invalid":
        return "invalid_json"
    if kind == "extra_forbidden":
        return "unknown_field"
    if kind == "missing":
        return "missing_field"
    if kind.endswith("too_long"):
        return "too_long"
    return "invalid_input"


def validation_error(errors: Sequence[Any], where: str = "body") -> ApiError:
    """The answer for pydantic's errors (the first one); ``where`` names a value that failed
    as a whole (a body that is not an object, say)."""
    err = dict(errors[0]) if errors else {}
    code = _validation_code(err)
    if code == "invalid_json":
        return ApiError(400, code, INVALID_JSON)
    if code == "unknown_field":
        message = "unknown field"
    elif err.get("type") in _NOT_AN_OBJECT:  # pydantic's message names the model's class
        message = "must be a JSON object"
    else:
        message = _message(err)
    return ApiError(422, code, message, _field(tuple(err.get("loc", ()))) or where)


def _message(err: dict[str, Any]) -> str:
    """pydantic's words for one error, said of the value: a text too long in characters
    (pydantic counts "items" once a validator ran first), a validator's own sentence without
    its ``Value error, `` prefix."""
    ctx = err.get("ctx") or {}
    if err.get("type") == "too_long" and ctx.get("field_type") == "Value":  # a text, checked
        return f"at most {ctx.get('max_length')} characters, not {ctx.get('actual_length')}"
    message = str(err.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")
