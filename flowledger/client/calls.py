"""One call to the ledger, shared by the sync and the async client: its URL, headers and
signature, which answers are retried, and what an answer means. The loops that send live in
:mod:`flowledger.client.sync` and :mod:`flowledger.client.aio`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from flowledger.client.errors import LedgerError
from flowledger.client.rules import signature, signing_key

SIGNATURE_HEADER = "X-Flowledger-Signature"


@dataclass(frozen=True)
class Settings:
    """Where the ledger is and how to call it. ``tries`` counts the first; the wait before the
    second is ``first_wait`` seconds, doubled for each further one."""

    url: str
    token: str
    signing_key: bytes | None
    timeout: float
    tries: int
    first_wait: float
    input_secret: bytes | None
    hash_inputs: bool


def settings(
    url: str | None,
    token: str | None,
    signing_secret: str | None,
    *,
    timeout: float,
    tries: int,
    first_wait: float,
    input_secret: bytes | str | None,
    hash_inputs: bool,
) -> Settings:
    """The settings from the arguments, else ``FLOWLEDGER_URL``, ``FLOWLEDGER_TOKEN`` and
    ``FLOWLEDGER_SIGNING_SECRET``."""
    url = url or os.environ.get("FLOWLEDGER_URL", "")
    token = token or os.environ.get("FLOWLEDGER_TOKEN", "")
    secret = signing_secret or os.environ.get("FLOWLEDGER_SIGNING_SECRET") or None
    if not url.startswith(("http://", "https://")):
        raise ValueError("the ledger's URL (or FLOWLEDGER_URL) must start with http:// or https://")
    if not token:
        raise ValueError("no token: pass token= or set FLOWLEDGER_TOKEN")
    if isinstance(input_secret, str):
        input_secret = input_secret.encode("utf-8")
    return Settings(
        url=url.rstrip("/"),
        token=token,
        signing_key=signing_key(secret) if secret else None,
        timeout=timeout,
        tries=max(1, tries),
        first_wait=first_wait,
        input_secret=input_secret or None,
        hash_inputs=hash_inputs,
    )


def operation_path(operation_id: str, call: str | None = None) -> str:
    """The operation's path (``/`` and ``:`` in its id escaped), and the call's under it."""
    path = f"/v1/operations/{quote(operation_id, safe='')}"
    return f"{path}/{call}" if call else path


def body_bytes(body: dict[str, Any] | None) -> bytes:
    if body is None:
        return b""
    payload = {k: v for k, v in body.items() if v is not None}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Stamp:
    """The signature's time: each try of a call stamped at least a second after the one
    before, since the ledger accepts a signature once (even one it then answered 5xx)."""

    def __init__(self) -> None:
        self.last = -1

    def next(self, now: float) -> int:
        self.last = max(int(now), self.last + 1)
        return self.last


def request(
    http: httpx.Client | httpx.AsyncClient,
    cfg: Settings,
    method: str,
    path: str,
    body: bytes,
    key: str | None,
    stamp: int,
) -> httpx.Request:
    headers = {"Authorization": f"Bearer {cfg.token}", "Accept": "application/json"}
    if method == "POST":
        headers["Content-Type"] = "application/json"
    if key is not None:
        headers["Idempotency-Key"] = key
    built = http.build_request(method, cfg.url + path, content=body or None, headers=headers)
    if cfg.signing_key is not None:
        sent_path = built.url.raw_path.decode("ascii")
        built.headers[SIGNATURE_HEADER] = signature(cfg.signing_key, stamp, method, sent_path, body)
    return built


def worth_retrying(status: int, code: str | None) -> bool:
    """No answer at all is retried too (by the loops). A retry is safe: it carries the same
    ``Idempotency-Key``."""
    return status >= 500 or status == 429 or (status == 409 and code == "idempotency_in_flight")


def refusal(response: httpx.Response, url: str) -> LedgerError:
    try:
        answer = response.json()
    except ValueError:
        answer = None
    error = answer.get("error") if isinstance(answer, dict) else None
    status = response.status_code
    if isinstance(error, dict):
        code = error.get("code") if isinstance(error.get("code"), str) else None
        field = error.get("field") if isinstance(error.get("field"), str) else None
        where = f" (field {field})" if field else ""
        return LedgerError(
            f"flowledger refused the call ({status} {code}): {error.get('message')}{where}",
            status=status,
            code=code,
            field=field,
        )
    return LedgerError(f"{url} answered {status} without a flowledger error", status=status)


@dataclass(frozen=True)
class Reply:
    """A JSON answer, and whether it was the stored answer to an earlier request with the same
    key that this call did not send (``Idempotent-Replayed`` on its first try)."""

    answer: dict[str, Any]
    replayed_earlier: bool


def reply_of(response: httpx.Response, url: str, first_try: bool) -> Reply:
    replayed = response.headers.get("Idempotent-Replayed", "").lower() == "true"
    return Reply(answer_of(response, url), replayed and first_try)


def answer_of(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise LedgerError(
            f"{url} answered {response.status_code} without JSON: is it the flowledger receiver?",
            status=response.status_code,
        )
    return answer


def unreachable(error: httpx.TransportError, url: str) -> LedgerError:
    return LedgerError(
        f"cannot reach the ledger at {url}: {type(error).__name__}: {error}", code="unreachable"
    )


def after_tries(last: LedgerError, tries: int) -> LedgerError:
    return LedgerError(
        f"{last} (after {tries} tries)", status=last.status, code=last.code, field=last.field
    )
