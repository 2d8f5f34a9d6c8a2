"""A blocking read run once at a time in a worker thread, that each caller waits for only up
to a bound: a database that stops answering then costs one stuck thread, not one a request,
and every caller an answer within its bound."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio


class InFlight:
    """``await flight.within(seconds)``: joins the run of ``read`` under way, or starts one;
    raises ``TimeoutError`` once ``seconds`` pass (the run goes on, for the next caller to
    join), or what ``read`` raised."""

    def __init__(self, read: Callable[[], object]) -> None:
        self.read = read
        self._run: asyncio.Future[object] | None = None

    async def within(self, seconds: float) -> None:
        run = self._run
        if run is None or run.done():
            run = self._run = asyncio.ensure_future(anyio.to_thread.run_sync(self.read))
            run.add_done_callback(_retrieved)
        await asyncio.wait_for(asyncio.shield(run), seconds)


def _retrieved(run: asyncio.Future[object]) -> None:
    """A run's error is its waiters' to raise; when they all gave up first, nobody's."""
    if not run.cancelled():
        run.exception()
