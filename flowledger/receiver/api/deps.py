"""The routes' dependencies: the running receiver's state, as an ``Annotated`` alias."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from flowledger.receiver.api.state import ReceiverState


async def state_of(request: Request) -> ReceiverState:
    """A dependency (async, so FastAPI does not hop to a worker thread to call it)."""
    return current(request)


def current(request: Request) -> ReceiverState:
    st: ReceiverState = request.app.state.receiver
    return st


StateDep = Annotated[ReceiverState, Depends(state_of)]
