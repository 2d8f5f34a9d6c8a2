"""The routes' dependencies: the running receiver's state, as an ``Annotated`` alias, and a
body sent as JSON."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.state import ReceiverState

NOT_JSON = ApiError(
    415, "unsupported_media_type", "send the body with Content-Type: application/json"
)


async def state_of(request: Request) -> ReceiverState:
    """A dependency (async, so FastAPI does not hop to a worker thread to call it)."""
    return current(request)


def current(request: Request) -> ReceiverState:
    st: ReceiverState = request.app.state.receiver
    return st


StateDep = Annotated[ReceiverState, Depends(state_of)]


def is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/…+json``, parameters aside (as FastAPI's routes
    read a body as JSON); no Content-Type is not JSON."""
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def json_body(request: Request) -> None:
    """A dependency: 415 for a body not sent as JSON, as the write lane answers it (after the
    token's dependency, before the body is validated)."""
    if not is_json(request.headers.get("content-type")):
        raise NOT_JSON


JsonBody = Annotated[None, Depends(json_body)]
