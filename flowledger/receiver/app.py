"""The app factory: nothing is opened at import time; ``create_app`` takes an open store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema

from flowledger.config import ReceiverConfig
from flowledger.domain.checkpoints import Signer
from flowledger.receiver.api import handlers
from flowledger.receiver.api.clients import Clients
from flowledger.receiver.api.guard import BodyGuard
from flowledger.receiver.api.routes import calls, health, holds, proofs, reads, tiles
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import TokenCache, record_use, signing_key
from flowledger.receiver.engine.runtime import Engine
from flowledger.services.ledger import Ledger
from flowledger.storage.unit_of_work import Work

TOKEN_USE_EVERY = 60.0  # seconds between two writes of the tokens' last use

DESCRIPTION = """Workflows call `dispatch` before each write to another system and `confirm`
or `fail` after it. Business decisions are always 200 with `decision` (`go`, `skip`, `hold`),
so an n8n IF node can branch on it. Authenticate with `Authorization: Bearer <token>`
(`flowledger token create`). Errors have one shape: `{"error": {"code", "message", "field"}}`.
"""


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
    """The receiver over ``ledger``: FastAPI's routes behind the body guard. With
    ``writer_process`` the workflow calls are committed by a child process
    (:mod:`flowledger.receiver.engine.writer_process`), which needs the ledger's own clock and
    a database the child can open by its URL."""
    config = config or ReceiverConfig()
    engine = Engine(
        ledger,
        writer_process=writer_process,
        log_format=config.log_format,
        deadline=config.write_deadline.total_seconds(),
    )
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
        read_deadline=config.read_deadline.total_seconds(),
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

    app = FastAPI(
        title="flowledger",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        # Prometheus is the receiver's telemetry (/metrics); FastAPI's own OpenTelemetry
        # checks cost every request a few microseconds (bench/README.md, "Receiver engine").
        telemetry={"tracing": False, "metrics": False, "logs": False},
        default_response_class=handlers.AsciiJSONResponse,
    )
    app.state.receiver = state
    handlers.install(app)
    timeout = config.body_timeout.total_seconds()
    clients = Clients(config.max_connections_per_client)  # requests in flight, per client
    app.add_middleware(
        BodyGuard, limit=config.body_limit, timeout=timeout, timed=True, clients=clients
    )
    calls.add_routes(app)  # first: ".../x/dispatch" is the call, not a read of x
    app.include_router(proofs.router)  # before the reads: /operations/{id}/proof is no {id}
    app.include_router(tiles.router)
    app.include_router(reads.router)
    app.include_router(holds.router)
    app.include_router(health.router)

    def openapi() -> dict[str, Any]:
        """FastAPI's schema, with the bodies of the workflow calls among its components (their
        routes read the body themselves, after the token: :mod:`.api.routes.calls`)."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _, bodies = models_json_schema(
                [(model, "validation") for model in calls.body_models()],
                ref_template="#/components/schemas/{model}",
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(bodies["$defs"])
            app.openapi_schema = schema
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
