"""The receiver's engine: the workflow calls served straight from ASGI (the write lane, behind
the body guard and the latency timer, in front of FastAPI) and written by group commit, in a
thread or in a writer process of its own; and serving it all with uvicorn (:mod:`.server`).

The app (:mod:`flowledger.receiver.app`) uses the engine through these two names only:
:class:`Engine` (start, close, the API's own writes) and :func:`front` (the ASGI app it
serves behind)."""

from __future__ import annotations

from starlette.types import ASGIApp

from flowledger.config import ReceiverConfig
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.engine.lane import WriteLane
from flowledger.receiver.engine.middleware import BodyGuard
from flowledger.receiver.engine.runtime import Engine

__all__ = ["Engine", "front"]


def front(app: ASGIApp, engine: Engine, state: ReceiverState, config: ReceiverConfig) -> BodyGuard:
    """What every HTTP request passes before ``app``: the latency timer and the body guard
    (limit and timeout, applied as the body is read), then the write lane, which serves the
    workflow calls through ``engine`` and hands the rest to ``app``."""
    lane = WriteLane(app, state, engine)
    timeout = config.body_timeout.total_seconds()
    return BodyGuard(lane, limit=config.body_limit, timeout=timeout, timed=True)
