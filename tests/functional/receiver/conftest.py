"""An app on a fresh ledger (SQLite and PostgreSQL), a client, and one token per scope.

The client is httpx over ``ASGITransport`` driven from a blocking portal, so tests stay plain
functions while the app runs its lifespan (the writer thread) in an event loop of its own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
import httpx
import pytest
from fastapi import FastAPI

from ledger.config import ReceiverConfig
from ledger.receiver import create_app
from ledger.writer.services import Ledger
from tests.receiver_support import SECRET, auth, make_token

BODY_LIMIT = 4096


@dataclass
class Api:
    portal: anyio.from_thread.BlockingPortal
    client: httpx.AsyncClient
    ledger: Ledger
    tokens: dict[str, str]

    def request(self, method: str, path: str, *, token: str | None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers.update(auth(self.tokens.get(token, token)))
        call = functools.partial(self.client.request, method, path, headers=headers, **kw)
        return self.portal.call(call)

    def post(
        self, path: str, body: Any = None, *, token: str | None = "write", **kw: Any
    ) -> httpx.Response:
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, token=token, **kw)

    def get(self, path: str, *, token: str | None = "read", **kw: Any) -> httpx.Response:
        return self.request("GET", path, token=token, **kw)


@contextlib.contextmanager
def running(app: FastAPI, ledger: Ledger, tokens: dict[str, str]) -> Iterator[Api]:
    with contextlib.ExitStack() as stack:
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        stack.enter_context(portal.wrap_async_context_manager(app.router.lifespan_context(app)))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://receiver.test")
        try:
            yield Api(portal, client, ledger, tokens)
        finally:
            portal.call(client.aclose)


@pytest.fixture
def api(ledger: Ledger) -> Iterator[Api]:
    tokens = {scope: make_token(ledger, scope, scope) for scope in ("write", "read", "operator")}
    app = create_app(
        ledger, config=ReceiverConfig(body_limit=BODY_LIMIT), secret=SECRET, token_ttl=0.0
    )
    with running(app, ledger, tokens) as client:
        yield client
