"""The app factory: nothing is opened at import time; ``create_app`` takes an open store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.types import Receive, Scope, Send

from flowledger.config import ReceiverConfig
from flowledger.domain.checkpoints import Signer
from flowledger.receiver.api import errors
from flowledger.receiver.api.routes import calls, health, holds, proofs, reads
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import TokenCache, record_use, signing_key
from flowledger.receiver.engine import Engine, front
from flowledger.services.ledger import Ledger
from flowledger.storage.unit_of_work import Work

TOKEN_USE_EVERY = 60.0  # seconds between two writes of the tokens' last use

DESCRIPTION = """Workflows call `dispatch` before each write to another system and `confirm`
or `fail` after it. Business decisions are always 200 with `decision` (`go`, `skip`, `hold`),
so an n8n IF node can branch on it. Authenticate with `Authorization: Bearer <token>`
(`flowledger token create`). Errors have one shape: `{"error": {"code", "message", "field"}}`.
"""


class Receiver(FastAPI):
    """FastAPI behind the engine's front (:func:`flowledger.receiver.engine.front`): every
    HTTP request passes the latency timer and the body guard, then the write lane serves the
    workflow calls and hands the rest to FastAPI. The lane sits in front of FastAPI's own
    middleware (error pages, telemetry checks) because those cost CPU on every call and the
    lane answers every error itself."""

    def __init__(
        self, state: ReceiverState, engine: Engine, config: ReceiverConfig, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.front = front(super().__call__, engine, state, config)
        # Also served from the HTTP parser's callbacks (flowledger.receiver.engine.exchange).
        self.write_lane = self.front.app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.front(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def _redacting(state: ReceiverState) -> Callable[[list[str]], None] | None:
    """What the token cache calls with the salts of signing tokens it has not seen before:
    their signing secrets join the secrets the ledger redacts (a token created while the
    receiver runs is redacted from its first request, not from the next start), in the
    writer process too."""
    secret = state.secret
    if secret is None:
        return None

    def redact(salts: list[str]) -> None:
        keys = [signing_key(secret, salt).hex() for salt in salts]
        state.ledger.add_secrets(keys)
        state.engine.add_secrets(keys)

    return redact


def create_app(
    ledger: Ledger,
    *,
    config: ReceiverConfig | None = None,
    secret: bytes | None = None,
    token_ttl: float = 2.0,
    writer_process: bool = False,
    signer: Signer | None = None,
) -> FastAPI:
    """The receiver over ``ledger``; with ``writer_process`` the write lane's calls are
    committed by a child process (:mod:`flowledger.receiver.engine.writer_process`), which needs the
    ledger's own clock and a database the child can open by its URL."""
    config = config or ReceiverConfig()
    engine = Engine(ledger, writer_process=writer_process)
    state = ReceiverState(
        store=ledger.store,
        ledger=ledger,
        engine=engine,
        tokens=TokenCache(ledger.store, ttl=token_ttl),
        secret=secret,
        body_limit=config.body_limit,
        idempotency_ttl=config.idempotency_ttl.total_seconds(),
        signature_window=config.signature_window.total_seconds(),
        signer=signer,
    )
    state.tokens.on_signing = _redacting(state)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        chore = asyncio.create_task(_every(TOKEN_USE_EVERY, lambda: _record_token_use(state)))
        try:
            yield
        finally:
            chore.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chore
            await _record_token_use(state)  # what the last minute saw
            await engine.close()

    app = Receiver(
        state,
        engine,
        config,
        title="flowledger",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.receiver = state
    errors.install(app)
    app.include_router(proofs.router)  # first: /operations/{id}/proof is not a read of {id}
    app.include_router(reads.router)
    app.include_router(holds.router)
    app.include_router(health.router)

    def openapi() -> dict[str, Any]:
        """FastAPI's schema of its routes and of the calls the write lane serves."""
        if app.openapi_schema is None:
            app.openapi_schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=[*calls.documented_routes(), *app.routes],
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


async def _every(seconds: float, chore: Callable[[], Awaitable[None]]) -> None:
    while True:
        await asyncio.sleep(seconds)
        await chore()


async def _quietly(state: ReceiverState, work: Work[Any]) -> None:
    """Housekeeping through the writer; a failure waits for the next turn."""
    with contextlib.suppress(Exception):
        await state.engine.commit("receiver", work)


async def _record_token_use(state: ReceiverState) -> None:
    used = state.tokens.take_used()
    if used:  # a minute of "last used" lost to a failure harms nobody
        await _quietly(state, record_use(used))
