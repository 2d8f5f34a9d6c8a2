"""The write lane: the workflow calls (:data:`~flowledger.receiver.api.routes.calls.CALLS`)
served straight from ASGI, inside the body guard and the latency timer, in front of FastAPI's
router.

Why not FastAPI routes: the receiver is bound by the interpreter lock, and a FastAPI route's
routing, dependency solving and request objects cost as much CPU per request as the writer
spends on the transition itself (bench/README.md, "Receiver engine"). The lane does the same
steps by hand, in the same order for every call: token and signature header (401/403, before
a byte of the body is read), body (413, 408), signature over the body (401), Content-Type
(415), operation id (422), JSON (400), body (422), one unit of work through the writer,
``Idempotency-Key``; a signature is recorded once in that unit's transaction. Validation is
pydantic's, on the same models FastAPI documents; errors have the one shape
(:mod:`flowledger.receiver.api.errors`). Everything else passes to FastAPI.

Served by ``serve`` and ``run``, a usual call does not come through ASGI at all: the HTTP
protocol hands it to an exchange (:mod:`~flowledger.receiver.engine.exchange`) that takes the
same steps through :meth:`WriteLane.start`. Whatever it does not take arrives here.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Mapping
from re import Pattern
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError
from starlette.routing import compile_path, get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

from flowledger.receiver.api.auth import Admission, Once, admit, check_body, target
from flowledger.receiver.api.deps import NOT_JSON, is_json
from flowledger.receiver.api.errors import INVALID_JSON, ApiError, as_api_error, validation_error
from flowledger.receiver.api.idempotency import key_of, request_hash, take_key
from flowledger.receiver.api.paths import check_raw_path
from flowledger.receiver.api.routes.calls import CALLS, Call, documented_route
from flowledger.receiver.api.schemas.fields import WrittenOperationId
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.receiver.engine.idempotency import answer
from flowledger.receiver.engine.reply import Reply
from flowledger.receiver.engine.runtime import Engine
from flowledger.receiver.engine.wire import LaneCall
from flowledger.receiver.engine.writer_process import WriterProcess

_OPERATION_ID: TypeAdapter[str] = TypeAdapter(WrittenOperationId)
NOT_ALLOWED = ApiError(405, "method_not_allowed", "send POST", headers={"Allow": "POST"})
LINE_BREAK = ApiError(
    422, "invalid_id", "must not contain control or bidi characters", "operation_id"
)
OPERATIONS = "/v1/operations/"
# The client went away mid-body: nothing is written, and nobody reads this (counted, though).
INCOMPLETE_BODY = ApiError(400, "incomplete_body", "the body ended before its end")
LANE_HEADERS = {
    b"authorization": "authorization",
    b"x-flowledger-signature": "signature",
    b"idempotency-key": "key",
    b"content-type": "content_type",
}


def lane_headers(scope: Scope) -> dict[str, str]:
    """The few request headers the lane reads (the first of each, as Starlette does)."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        wanted = LANE_HEADERS.get(name.lower())
        if wanted is not None and wanted not in found:
            found[wanted] = value.decode("latin-1")
    return found


def _parse(call: Call, body: bytes) -> Any:
    if not body:
        raise ApiError(422, "missing_field", "Field required", "body")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", INVALID_JSON) from None
    try:
        return call.body.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_input=False)) from None


class WriteLane:
    """ASGI middleware serving POSTs to the workflow calls' paths; the rest goes on."""

    def __init__(self, app: ASGIApp, state: ReceiverState, engine: Engine) -> None:
        self.app = app
        self.state = state
        self.engine = engine  # its writer process, when it runs one, else its group commit
        # DOTALL: an id holding a line break is matched, and refused as an id (422), instead
        # of falling through to a bare 404.
        self.routes: list[tuple[Pattern[str], Call, Any]] = [
            (_pattern(call.path), call, documented_route(call)) for call in CALLS
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reply = await self._reply(scope, receive) if scope["type"] == "http" else None
        if reply is None:
            await self.app(scope, receive, send)
        else:
            await reply.send(send)

    def match(self, path: str) -> tuple[Call, dict[str, str], Any] | None:
        """The call whose path ``path`` is, its path's parameters and its documented route."""
        for pattern, call, route in self.routes:
            found = pattern.match(path)
            if found is not None:
                return call, found.groupdict(), route
        return None

    async def _reply(self, scope: Scope, receive: Receive) -> Reply | None:
        """The lane's answer, or None for a request FastAPI serves."""
        path, method = get_route_path(scope), scope["method"]
        if "\n" in path and path.startswith(OPERATIONS):
            # Routes end in ``$``, which matches before a final line break (``x/dispatch%0A``
            # would be the dispatch of ``x``), and a read's route stops at one (``a%0Ab``
            # would be a bare 404): refused as an id, whatever the route.
            return Reply.error(LINE_BREAK)
        matched = self.match(path)
        if matched is not None:
            call, params, route = matched
            if method == "POST":
                scope["route"] = route  # what the latency metric is labelled with
                return await self._serve(call, params, scope, receive)
            # GET too: ".../x/dispatch" is the dispatch call, not an operation named
            # "x/dispatch" to read.
            return Reply.error(NOT_ALLOWED)
        slashed = method == "POST" and path.endswith("/")
        if slashed and self.match(path[:-1]) is not None:
            return _without_slash(scope)
        return None

    async def _serve(
        self, call: Call, params: Mapping[str, str], scope: Scope, receive: Receive
    ) -> Reply:
        try:
            headers = lane_headers(scope)
            admission = await admit(
                self.state,
                "write",
                authorization=headers.get("authorization"),
                signature=headers.get("signature"),
            )
            body = await _body(receive)
            if body is None:
                raise INCOMPLETE_BODY
        except Exception as exc:
            return refusal(exc)
        return await self.answered(call, self.start(call, params, scope, headers, admission, body))

    def start(
        self,
        call: Call,
        params: Mapping[str, str],
        scope: Scope,
        headers: Mapping[str, str],
        admission: Admission,
        body: bytes,
    ) -> Reply | Awaitable[Reply]:
        """Everything after the body was read whole, up to the hand-over of the call's unit:
        the answer now when the request is refused, else what gives it once written (a future
        of the writer process, or the group commit's coroutine). Shared by :meth:`_serve` and
        the exchanges served from the parser's callbacks
        (:mod:`~flowledger.receiver.engine.exchange`)."""
        try:
            st = self.state
            # What a signature covers, made only for a token that signs.
            signed = target(scope) if admission.key is not None else b""
            principal, guard = check_body(st, admission, signed, body)
            if not is_json(headers.get("content_type")):
                raise NOT_JSON
            operation_id = _operation_id(scope, params) if call.has_operation else None
            model = _parse(call, body)
            header = headers.get("key")
            writer = self.engine.writer
            if writer is not None:
                fingerprint = request_hash("POST", scope["path"], body) if header else ""
                return _to_writer(
                    st, writer, call, operation_id, model, principal, header, fingerprint, guard
                )
            work = _work(st, call, operation_id, model, principal.token_id)
            key = key_of(header)
            fingerprint = request_hash("POST", scope["path"], body) if key is not None else ""
            return answer(
                st,
                self.engine.committer,
                principal,
                work,
                key=key,
                fingerprint=fingerprint,
                guard=guard,
                reads=operation_id,
            )
        except Exception as exc:
            return refusal(exc)

    async def answered(self, call: Call, outcome: Reply | Awaitable[Reply]) -> Reply:
        """The answer :meth:`start` gave or will give, its value observed."""
        try:
            reply = outcome if isinstance(outcome, Reply) else await outcome
        except Exception as exc:
            return refusal(exc)
        return self.observed(call, reply)

    def observed(self, call: Call, reply: Reply) -> Reply:
        """``reply``, its value counted by the call's metric (an answer replayed is not)."""
        try:
            if call.observe is not None and not reply.replayed:
                call.observe(reply.value)
        except Exception as exc:
            return refusal(exc)
        return reply


def refusal(exc: BaseException) -> Reply:
    """The one shape of an error answer, never a 500 with a trace (logged by class)."""
    return Reply.error(as_api_error(exc))


def _work(
    st: ReceiverState, call: Call, operation_id: str | None, model: Any, token_id: int
) -> Any:
    """The call's unit of work; the services' refusal of it as the API's error."""
    try:
        return call.work(st.ledger, operation_id, model, token_id)
    except Exception as exc:
        raise as_api_error(exc) from None


def _to_writer(
    st: ReceiverState,
    writer: WriterProcess,
    call: Call,
    operation_id: str | None,
    model: Any,
    principal: Principal,
    header: str | None,
    fingerprint: str,
    guard: Once | None,
) -> asyncio.Future[Reply]:
    """The call handed to the writer process, which builds its unit from the same parts: the
    future of its answer. The services' checks of the call run there, so where the lane would
    refuse the request before them (a bad ``Idempotency-Key``, or one in use) the unit is
    built here first, as the lane does without a writer process: its refusal comes first,
    whichever process writes."""
    try:
        key = key_of(header)
    except ApiError:
        _work(st, call, operation_id, model, principal.token_id)
        raise
    if key is not None and (principal.token_id, key) in st.in_flight:
        _work(st, call, operation_id, model, principal.token_id)
    lane_call = LaneCall(
        call.name,
        operation_id,
        model,
        principal.actor,
        principal.token_id,
        key,
        fingerprint,
        st.idempotency_ttl,
        guard,
        call.observe is not None,
    )
    if key is None:  # the usual call: no key to hold while it runs
        return writer.submit(lane_call)
    release = take_key(st, principal, key)
    written = writer.submit(lane_call)
    written.add_done_callback(lambda _: release())
    return written


def _pattern(path: str) -> Pattern[str]:
    return re.compile(compile_path(path)[0].pattern, re.DOTALL)


def _operation_id(scope: Scope, params: Mapping[str, str]) -> str:
    """The path's operation id, checked as every id is (:func:`check_raw_path` first)."""
    check_raw_path(scope)
    try:
        return _OPERATION_ID.validate_python(params["operation_id"])
    except ValidationError as exc:
        error = validation_error(exc.errors(), "operation_id")
        if error.code == "invalid_input":
            error.code = "invalid_id"
        raise error from None


def _without_slash(scope: Scope) -> Reply:
    """A 307 to the path without its trailing slash, as FastAPI's router answers (307 keeps
    the method and the body)."""
    path = scope["path"][:-1]  # the full path: root_path included, as ASGI has it
    query = scope.get("query_string", b"").decode("latin-1")
    location = quote(path, safe="/:@!$&'()*+,;=-._~%") + (f"?{query}" if query else "")
    return Reply(307, b"", headers={"Location": location})


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (the body guard around the lane caps its size and the time it
    may take), or None if the client disconnected before it ended."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
