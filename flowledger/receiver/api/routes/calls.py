"""The workflow calls' routes: one FastAPI route per row of
:data:`~flowledger.receiver.api.calls.CALLS`, serving it and documenting it in the OpenAPI.

Each takes the same steps, in this order: the token and the signature header (401/403, before a
byte of the body is read: :func:`~flowledger.receiver.api.auth.admit`), the body (413 and 408
from the guard that caps its reading: :mod:`flowledger.receiver.api.guard`), the signature over
the body (401), Content-Type (415; 400 for a charset or Content-Encoding), the operation id
(422), JSON (400, read strictly: :mod:`flowledger.receiver.api.bodies`), the body's fields (422),
then one :class:`~flowledger.receiver.api.calls.CallRequest` to the engine, which writes it
durably (in its writer process when it runs one) and gives back the answer; an
``Idempotency-Key`` is honoured in the writer's transaction. That is why the body is read here
rather than declared as a parameter: FastAPI would read and validate it before the token was
checked. Validation is pydantic's, on the models the OpenAPI shows; errors have the one shape.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from flowledger.receiver.api.auth import admit, check_body, target
from flowledger.receiver.api.bodies import headers_problem, loads
from flowledger.receiver.api.calls import CALLS, Call, CallRequest, work_of
from flowledger.receiver.api.deps import NOT_JSON, current, is_json
from flowledger.receiver.api.errors import (
    ApiError,
    as_api_error,
    documented,
    validation_error,
)
from flowledger.receiver.api.idempotency import key_of, request_hash, take_key
from flowledger.receiver.api.paths import check_raw_path
from flowledger.receiver.api.reply import JSON, Reply
from flowledger.receiver.api.schemas.fields import WrittenOperationId
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal

log = logging.getLogger("flowledger.receiver")
ERRORS = documented(400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 503)
_OPERATION_ID: TypeAdapter[str] = TypeAdapter(WrittenOperationId)
# The path's operation id as the OpenAPI shows it: the constraints the route checks, after the
# token (so not a parameter FastAPI would check before it; reading one costs every call, too).
OPERATION_ID_PARAMETER = {
    "name": "operation_id",
    "in": "path",
    "required": True,
    "description": "The workflow's stable operation id; no segment between its ':' may be "
    "empty or what a missing value becomes as text (undefined, null, NaN, [object Object])",
    "schema": {**_OPERATION_ID.json_schema(), "title": "Operation Id"},
}
NOT_ALLOWED = ApiError(405, "method_not_allowed", "send POST", headers={"Allow": "POST"})
# The client went away mid-body: nothing is written, and nobody reads this.
INCOMPLETE_BODY = ApiError(400, "incomplete_body", "the body ended before its end")


def response(reply: Reply) -> Response:
    return Response(reply.body, reply.status, reply.header_map(), media_type=JSON)


def refusal(exc: BaseException) -> Reply:
    """The one shape of an error answer, never a 500 with a trace (logged by class)."""
    return Reply.error(as_api_error(exc))


async def serve(call: Call, request: Request, operation_id: str | None) -> Reply:
    """``call`` as ``request`` asks it, answered: every step of the module's text."""
    st = current(request)
    headers = request.headers
    try:
        admission = await admit(
            st,
            "write",
            authorization=headers.get("authorization"),
            signature=headers.get("x-flowledger-signature"),
        )
        try:
            body = await request.body()
        except ClientDisconnect:
            raise INCOMPLETE_BODY from None
        scope = request.scope
        # What a signature covers, made only for a token that signs.
        signed = target(scope) if admission.key is not None else b""
        principal, guard = check_body(st, admission, signed, body)
        content_type = headers.get("content-type")
        if not is_json(content_type):
            raise NOT_JSON
        encoding = headers.get("content-encoding")
        if content_type != JSON or encoding is not None:  # the usual: nothing more to check
            refused = headers_problem(content_type or "", encoding)
            if refused is not None:
                raise refused
        if operation_id is not None:
            operation_id = _operation_id(scope, operation_id)
        model = _parse(call, body)
        header = headers.get("idempotency-key")
        written = CallRequest(
            call.name,
            operation_id,
            model,
            principal.actor,
            principal.token_id,
            header,  # checked below, before it is held
            request_hash("POST", scope["path"], body) if header else "",
            st.idempotency_ttl,
            guard,
            call.observe is not None,
        )
        reply = await _write(st, written, principal)
    except Exception as exc:
        return refusal(exc)
    if call.observe is not None and not reply.replayed:  # counted once, not when replayed
        try:
            call.observe(reply.value)
        except Exception:  # a metric that fails never turns a write done into an error
            log.exception("the %s metric failed; the answer stands", call.name)
    return reply


def _write(st: ReceiverState, written: CallRequest, principal: Principal) -> Awaitable[Reply]:
    """``written`` handed to the engine, with its ``Idempotency-Key`` held as running here
    until it is answered. Where the key is refused (malformed, or in use), the services'
    refusal of the call comes first, as it would from the writer."""
    if written.key is None:  # the usual call: no key to hold while it runs
        return st.engine.write(written)
    try:
        release = take_key(st, principal, key_of(written.key) or "")
    except ApiError:
        work_of(st.ledger, written)  # raises what the services refuse it with, if anything
        raise
    answered = st.engine.write(written)
    return _released(answered, release)


async def _released(reply: Awaitable[Reply], release: Callable[[], None]) -> Reply:
    try:
        return await reply
    finally:
        release()


def _parse(call: Call, body: bytes) -> Any:
    if not body:
        raise ApiError(422, "missing_field", "Field required", "body")
    data = loads(body)
    try:
        return call.body.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_input=False)) from None


def _operation_id(scope: Any, raw: str) -> str:
    """The path's operation id, checked as every id is (:func:`check_raw_path` first)."""
    check_raw_path(scope)
    try:
        return _OPERATION_ID.validate_python(raw)
    except ValidationError as exc:
        error = validation_error(exc.errors(), "operation_id")
        if error.code == "invalid_input":
            error.code = "invalid_id"
        raise error from None


def _documented(call: Call) -> dict[str, Any]:
    """What the OpenAPI shows of the call beyond FastAPI's own: its operation id in the path
    and its body (whose schema is among the components: :func:`body_models`)."""
    schema = {"$ref": f"#/components/schemas/{call.body.__name__}"}
    body = {"required": True, "content": {"application/json": {"schema": schema}}}
    documented: dict[str, Any] = {"requestBody": body}
    if call.has_operation:
        documented["parameters"] = [OPERATION_ID_PARAMETER]
    return documented


def _endpoint(call: Call) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    """The route's function: the call served with the path's operation id, if it has one."""

    async def endpoint(request: Request) -> Response:
        return response(await serve(call, request, request.path_params.get("operation_id")))

    return endpoint


class CallRoute(APIRoute):
    """A workflow call's route. FastAPI documents it from its endpoint as any route; it
    serves it by calling the endpoint with the request (``get_route_handler``, FastAPI's
    documented way to change how a route handles its requests), without solving dependencies
    or serializing a response: the endpoint takes only the request and returns the answer
    made, and those steps cost every call as much as the call's own checks (bench/README.md,
    "Receiver engine")."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler: Callable[[Request], Coroutine[Any, Any, Response]] = self.endpoint
        return handler


class _NotAllowed:
    """405 for any method but POST: an ASGI endpoint, which Starlette's route takes for every
    method (a function endpoint would be GET and HEAD alone)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await response(Reply.error(NOT_ALLOWED))(scope, receive, send)


async def _without_slash(request: Request) -> Response:
    """A 307 to the path without its trailing slash, as FastAPI's router answers elsewhere
    (307 keeps the method and the body)."""
    path = request.scope["path"][:-1]  # the full path: root_path included, as ASGI has it
    query = request.scope.get("query_string", b"").decode("latin-1")
    location = quote(path, safe="/:@!$&'()*+,;=-._~%") + (f"?{query}" if query else "")
    return Response(status_code=307, headers={"Location": location})


def add_routes(app: FastAPI) -> None:
    """Every call's route on ``app`` itself (an included router is one more level to match on
    every request), and after each the answers to the other methods and to a trailing slash:
    any other method is 405, GET included (".../x/dispatch" is the dispatch call, not a read of
    an operation "x/dispatch"); a trailing slash is redirected."""
    for call in CALLS:
        app.router.add_api_route(
            call.path,
            _endpoint(call),
            methods=["POST"],
            name=call.name,
            description=call.doc,
            response_model=call.response,
            responses=ERRORS,
            tags=[call.tag],
            openapi_extra=_documented(call),
            route_class_override=CallRoute,
        )
        app.router.routes.append(Route(call.path, _NotAllowed(), include_in_schema=False))
        app.add_route(f"{call.path}/", _without_slash, methods=["POST"], include_in_schema=False)


def body_models() -> list[type[Any]]:
    """The bodies the calls accept, for the OpenAPI's components."""
    return [call.body for call in CALLS]
