"""The app factory: nothing is opened at import time; ``create_app`` takes an open store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from ledger.config import ReceiverConfig
from ledger.receiver import errors, health, reads, writes
from ledger.receiver.committer import Committer, commit, committer_for
from ledger.receiver.idempotency import purge_expired
from ledger.receiver.middleware import BodyLimit, Timing
from ledger.receiver.state import ReceiverState
from ledger.receiver.tokens import TokenCache
from ledger.services import Ledger

PURGE_EVERY = 600.0  # seconds between two sweeps of expired idempotency keys

DESCRIPTION = """Workflows call `dispatch` before each write to another system and `confirm`
or `fail` after it. Business decisions are always 200 with `decision` (`go`, `skip`, `hold`),
so an n8n IF node can branch on it. Authenticate with `Authorization: Bearer <token>`
(`flowledger token create`). Errors have one shape: `{"error": {"code", "message", "field"}}`.
"""


def create_app(
    ledger: Ledger,
    *,
    config: ReceiverConfig | None = None,
    secret: bytes | None = None,
    committer: Committer | None = None,
    token_ttl: float = 2.0,
) -> FastAPI:
    config = config or ReceiverConfig()
    state = ReceiverState(
        store=ledger.store,
        ledger=ledger,
        committer=committer or committer_for(ledger),
        tokens=TokenCache(ledger.store, ttl=token_ttl),
        secret=secret,
        body_limit=config.body_limit,
        idempotency_ttl=config.idempotency_ttl.total_seconds(),
        signature_window=config.signature_window.total_seconds(),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.committer.start()
        purger = asyncio.create_task(_purge_now_and_then(state))
        try:
            yield
        finally:
            purger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await purger
            state.committer.close()

    app = FastAPI(
        title="flowledger",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.receiver = state
    errors.install(app)
    app.include_router(writes.router)
    app.include_router(reads.router)
    app.include_router(health.router)
    app.add_middleware(BodyLimit, limit=config.body_limit)
    app.add_middleware(Timing)
    return app


async def _purge_now_and_then(state: ReceiverState) -> None:
    while True:
        await asyncio.sleep(PURGE_EVERY)
        with contextlib.suppress(Exception):
            await commit(state.committer, "receiver", purge_expired)
