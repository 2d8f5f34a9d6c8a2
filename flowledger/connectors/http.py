"""One JSON request, with every way it can go wrong turned into a :class:`ConnectorError`.

Shared by the connectors so that each says the same thing about the same failure: which
status, which URL (without credentials), and what to do. The body is read with a byte limit,
so a hostile or broken server cannot make the ledger hold an unbounded answer in memory.
"""

from __future__ import annotations

import json
import ssl
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from flowledger.connectors.base import (
    AuthFailed,
    ConnectorError,
    ConnectTimedOut,
    Malformed,
    NoApi,
    NoConnection,
    NotReady,
    RateLimited,
    ServerError,
    Unreachable,
    clean_text,
)

MAX_BODY = 16 * 1024 * 1024


class NotFound(ConnectorError):
    """404 for one record: the caller decides what that means (``said``: the tool's words)."""

    said = ""


class PageNotFound(NotReady):
    """404 that is not the API's own JSON answer, from a tool that serves one while it starts
    (n8n): not "no such record"; kept for later like a tool still starting."""


class Conflict(ConnectorError):
    """409: the tool refused what was asked in the state the record is in (n8n: an execution
    that is queued, aborted or succeeded cannot be retried); the message carries its words."""


class BadRequest(Malformed):
    """400: the tool refused what was asked (a stale cursor, a limit it does not allow)."""


def public_url(url: str) -> str:
    """``url`` without user, password, query or fragment: safe to print."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    tool: str,
    headers: dict[str, str] | None = None,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    max_body: int = MAX_BODY,
    starting_marker: str | None = None,
    missing_credentials: str | None = None,
) -> tuple[Any, httpx.Headers]:
    """Send one request and return the decoded JSON body and the response headers.
    ``starting_marker``: the page a starting tool serves (n8n); with it, a 404 that is not the
    API's JSON ``message`` is :class:`NotReady` too, never "not found".
    ``missing_credentials``: when the source has none configured, what to set (a 401 or 403
    then says the tool wants credentials, not that the ones given lack a permission)."""
    where = public_url(url)
    try:
        with client.stream(method, url, headers=headers, params=params, json=json_body) as response:
            body = _read_limited(response, max_body, where)
            status = response.status_code
            content_type = response.headers.get("content-type", "")
            resp_headers = response.headers
    except httpx.ConnectTimeout as exc:
        raise ConnectTimedOut(
            f"cannot reach {tool} at {where}: nothing accepted the connection within "
            f"{_seconds(client.timeout.connect)} (connect_timeout; check the host and port "
            "in base_url, and any firewall)"
        ) from exc
    except httpx.TimeoutException as exc:
        raise Unreachable(
            f"{tool} at {where} did not answer in time ({type(exc).__name__})"
        ) from exc
    except httpx.ConnectError as exc:
        if _is_tls(exc):
            raise NoConnection(
                f"TLS failed talking to {where}: {clean_text(_root(exc), 160)} "
                "(wrong scheme, self-signed or expired certificate?)"
            ) from exc
        raise NoConnection(
            f"cannot reach {tool} at {where}: {clean_text(_root(exc), 160)} (is {tool} "
            "running there? check the host and port in base_url)"
        ) from exc
    except httpx.TransportError as exc:
        raise Unreachable(f"connection to {where} failed: {clean_text(exc, 160)}") from exc

    text_head = body[:2000].decode("utf-8", "replace")
    html = "text/html" in content_type.lower()
    if starting_marker and html and starting_marker in text_head:
        raise NotReady(f"{tool} at {where} is still starting up; try again shortly")
    if status in (401, 403) and missing_credentials:
        raise AuthFailed(
            f"{tool} answered {status} at {where} and this source has no credentials: "
            f"{tool} requires them here (set {missing_credentials}) ({_said(body)})"
        )
    if status == 401:
        raise AuthFailed(f"{tool} refused the credentials (401) at {where}: {_said(body)}")
    if status == 403:
        raise AuthFailed(
            f"{tool} answered 403 at {where}: the credentials lack a permission or scope "
            f"this needs ({_said(body)})"
        )
    if status == 404 and starting_marker and not _api_said(body, content_type):
        # n8n's own answer to a missing record is JSON with a ``message``; an HTML 404
        # ("Cannot POST …") is Express answering before n8n's API routes are mounted.
        raise PageNotFound(
            f"{tool} at {where} answered 404 with a page, not its API's JSON, as it does while "
            "still starting; try again shortly (if this lasts, check base_url)"
        )
    if status == 404:
        missing = NotFound(f"{where} not found (404)")
        missing.said = _said(body)
        raise missing
    if status == 429:
        raise RateLimited(
            f"{tool} at {where} is rate limiting (429)",
            retry_after=response.headers.get("retry-after"),
        )
    if status >= 500:
        raise ServerError(
            f"{tool} at {where} failed with {status}: {_said(body)}",
            retry_after=response.headers.get("retry-after"),
        )
    if status == 405 or (status >= 400 and html):
        # Not the tool's API at this path: base_url carries a path the connector then extends
        # (its API path twice, or a UI path), or points at a proxy or another program.
        what = "does not allow " + method if status == 405 else "answered with an HTML page"
        raise NoApi(
            f"{where} {what} ({status} {_reason(status)}): not the {tool} API there; check "
            f"the path in base_url (the address {tool} is served at, without its API path)"
        )
    if status == 409:
        raise Conflict(f"{tool} at {where} refused (409): {_said(body)}")
    if status == 400:
        raise BadRequest(f"{tool} at {where} rejected the request (400): {_said(body)}")
    if 300 <= status < 400:
        target = public_url(urljoin(url, resp_headers.get("location", "")))
        raise NoApi(f"{where} redirects ({status}) to {target}: set base_url to where the API is")
    if status >= 400:
        raise Malformed(f"{tool} at {where} rejected the request with {status}: {_said(body)}")
    if "json" not in content_type.lower():
        kind = clean_text(content_type.split(";")[0] or "no content type", 60)
        raise Malformed(
            f"{where} answered {status} {kind}, not JSON: is this the {tool} API (check the path "
            "in base_url)?"
        )
    try:
        return json.loads(body), resp_headers
    except (ValueError, UnicodeDecodeError) as exc:
        raise Malformed(
            f"{where} answered JSON that does not parse ({exc.__class__.__name__})"
        ) from exc


def _api_said(body: bytes, content_type: str) -> bool:
    """Whether a body is an API's JSON error: an object with a ``message`` string."""
    if "json" not in content_type.lower():
        return False
    try:
        answer = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(answer, dict) and isinstance(answer.get("message"), str)


def server_time(headers: httpx.Headers, tool: str) -> datetime:
    """When the server answered, by its own clock (its ``Date`` header), in UTC."""
    try:
        when = parsedate_to_datetime(headers.get("date", ""))
    except (TypeError, ValueError) as exc:
        raise Malformed(f"{tool} answered without a valid Date header") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "unknown status"


def _seconds(value: float | None) -> str:
    return "the time allowed" if value is None else f"{value:g} s"


def _read_limited(response: httpx.Response, limit: int, where: str) -> bytes:
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise Malformed(f"{where} answered {int(declared):,} bytes, over the {limit:,}-byte limit")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise Malformed(f"{where} answered more than the {limit:,}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _said(body: bytes) -> str:
    """The tool's own short explanation, when it gave one in JSON."""
    try:
        data = json.loads(body)
    except ValueError:
        return "no explanation"
    if isinstance(data, dict):
        for key in ("message", "detail", "error", "title"):
            if isinstance(data.get(key), str):
                return clean_text(data[key], 160)
    return "no explanation"


def _root(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return exc


def _is_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "SSL" in type(seen).__name__:
            return True
        if "CERTIFICATE" in str(seen).upper() or "SSL" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
