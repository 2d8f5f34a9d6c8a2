"""What a running receiver holds: its store, services, writer, token cache and limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from flowledger.receiver.api.tokens import TokenCache
from flowledger.receiver.engine.committer import GroupCommitter
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store

if TYPE_CHECKING:
    from flowledger.receiver.engine.writer_process import WriterProcess


@dataclass
class ReceiverState:
    store: Store
    ledger: Ledger
    committer: GroupCommitter
    tokens: TokenCache
    secret: bytes | None
    body_limit: int
    idempotency_ttl: float  # seconds
    signature_window: float  # seconds
    # The write lane's calls go to this process's writer child when it has one
    # (:mod:`flowledger.receiver.engine.writer_process`), else to ``committer``.
    writer: WriterProcess | None = None
    # Ends serving gracefully (set by :func:`flowledger.receiver.engine.server.serve_app`).
    stop: Callable[[], None] | None = None
    # (token id, key) of the Idempotency-Key requests this process is running now.
    in_flight: set[tuple[int, str]] = field(default_factory=set)
    # One token-cache reload at a time, however many requests find it stale together.
    token_reload: asyncio.Lock = field(default_factory=asyncio.Lock)


async def state_of(request: Request) -> ReceiverState:
    """A dependency (async, so FastAPI does not hop to a worker thread to call it)."""
    return current(request)


def current(request: Request) -> ReceiverState:
    st: ReceiverState = request.app.state.receiver
    return st
