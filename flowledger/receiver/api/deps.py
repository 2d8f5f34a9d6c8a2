"""The routes' dependencies: the running receiver's state, as an ``Annotated`` alias, the
calling token (:func:`require`), and a body sent as JSON, read strictly
(:class:`StrictJsonRoute`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Path, Request, Response
from fastapi.routing import APIRoute

from flowledger.receiver.api.auth import admit, check_body, target
from flowledger.receiver.api.bodies import headers_problem, loads
from flowledger.receiver.api.errors import ApiError, as_api_error
from flowledger.receiver.api.schemas.fields import Id
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.storage.tx import Tx

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
OperationId = Annotated[Id, Path(description="The workflow's stable operation id")]


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
    """A dependency: 415 for a body not sent as JSON, as the workflow calls answer it (after the
    token's dependency, before the body is validated)."""
    if not is_json(request.headers.get("content-type")):
        raise NOT_JSON


JsonBody = Annotated[None, Depends(json_body)]


def _nothing(tx: Tx) -> None:
    """The unit behind a read's guard: a read writes nothing."""


def require(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency that admits a token whose scope covers ``scope``; the body is read only
    for a token that signs (its signature covers the body), after its headers passed."""

    async def dependency(request: Request) -> Principal:
        headers = request.headers
        admission = await admit(
            current(request),
            scope,
            authorization=headers.get("authorization"),
            signature=headers.get("x-flowledger-signature"),
        )
        if admission.key is None:
            return admission.principal
        body = await request.body()
        st = current(request)
        principal, guard = check_body(st, admission, target(request.scope), body)
        try:
            await st.engine.commit(principal.actor, _nothing, guard)
        except Exception as exc:
            raise as_api_error(exc) from None
        return principal

    return dependency


class BodyRefused(HTTPException):
    """A body :class:`StrictJsonRoute` refused, carrying the refusal (FastAPI turns any other
    error raised while it reads a body into a plain 400)."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.status, error.message)
        self.error = error


class _StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            headers = self.headers
            refused = headers_problem(
                headers.get("content-type") or "", headers.get("content-encoding")
            )
            try:
                if refused is not None:
                    raise refused
                self._json = loads(await self.body())
            except ApiError as exc:
                raise BodyRefused(exc) from None
        return self._json


class StrictJsonRoute(APIRoute):
    """A route whose JSON body is read as the workflow calls read theirs
    (:mod:`flowledger.receiver.api.bodies`): FastAPI's documented way to change how a route
    reads its request, a ``Request`` subclass handed to the route's own handler."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictJsonRequest(request.scope, request.receive))

        return strict
