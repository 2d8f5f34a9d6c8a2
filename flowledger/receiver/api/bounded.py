"""Reads of the database that the receiver waits for only up to a bound, in worker threads:
a database that stops answering holds those threads, never the caller past its bound.

:class:`InFlight` runs one read at a time (the readiness check, the token list's refresh):
however many callers want it, the stuck database costs one thread. :func:`read` runs one
route's read, and answers 503 with ``Retry-After`` once its bound has passed."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from flowledger.receiver.api.errors import unavailable

T = TypeVar("T")


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


async def read(seconds: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread, or 503 ``unavailable`` once ``seconds``
    have passed (the thread is left to finish when the database answers)."""
    call = functools.partial(fn, *args, **kwargs)
    with anyio.move_on_after(seconds):
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    raise unavailable(f"the ledger's database did not answer within {seconds:g} s; retry later")
