"""The ASGI layer in front of the routes: the body guard, which also observes each request's
latency by route, refuses a line break in an operation's path before any route sees it, and
caps the requests in flight per client address (``clients``: behind a trusted proxy, the
address its ``X-Forwarded-For`` names; :mod:`flowledger.receiver.api.clients`).

The body guard reads nothing itself: the app reads the body when it wants it, after the
token was checked on the headers alone (:func:`flowledger.receiver.api.auth.admit`), so a request
without a valid token is answered without its body being read or held. What the app does
read is capped while it streams in, never by trusting ``Content-Length``: past the limit the
read fails with 413, and a body that has not arrived whole within the timeout of the first
read fails with 408 (a client that declared 100,000 bytes and sends 5 holds nothing for
long). An answer sent before its request's body was read whole closes the connection, so
the rest of that body is never read either.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flowledger.plumbing.metrics import request_latency
from flowledger.receiver.api.clients import Clients
from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.reply import JSON, Reply

_CLOSE = (b"connection", b"close")
OPERATIONS = "/v1/operations/"
LINE_BREAK = ApiError(
    422, "invalid_id", "must not contain control or bidi characters", "operation_id"
)


async def send_reply(reply: Reply, send: Send) -> None:
    """Answer with ``reply`` through ASGI's ``send`` (the guard's own refusals, made before
    or around the routes)."""
    headers = [(b"content-type", JSON.encode()), (b"content-length", str(len(reply.body)).encode())]
    headers += [
        (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.header_map().items()
    ]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


class _Body:
    """One request's body as the app reads it: within ``limit`` bytes and ``timeout``
    seconds, or an :class:`ApiError` (413, 408) raised from ``receive``."""

    __slots__ = (
        "_receive",
        "_send",
        "deadline",
        "late",
        "limit",
        "pending",
        "size",
        "started",
        "status",
        "timeout",
        "watch",
    )

    def __init__(
        self, receive: Receive, send: Send, limit: int, timeout: float, pending: bool, watch: _Watch
    ) -> None:
        self._receive = receive
        self._send = send
        self.limit = limit
        self.timeout = timeout
        self.pending = pending  # part of the body is still unread
        self.size = 0
        self.deadline: float | None = None
        self.started = False  # the answer has begun
        self.status = 500  # the answer's status, once it has begun
        self.late = False  # set by the watch when the deadline passed mid-read
        self.watch = watch

    async def receive(self) -> Message:
        if not self.pending:  # no body, or all of it read: what comes next is a disconnect
            return await self._receive()
        if self.deadline is None:
            self.deadline = asyncio.get_running_loop().time() + self.timeout
        task = asyncio.current_task()
        assert task is not None
        self.watch.waiting[self] = task
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            if not self.late:
                raise
            task.uncancel()  # the cancellation was the watch's, not the server's
            raise ApiError(
                408, "body_timeout", f"the body did not arrive within {self.timeout:g} s"
            ) from None
        finally:
            self.watch.waiting.pop(self, None)
        if message["type"] != "http.request":
            self.pending = False  # the client went away
            return message
        self.size += len(message.get("body", b""))
        if self.size > self.limit:
            raise ApiError(413, "body_too_large", _too_big(self.limit))
        self.pending = message.get("more_body", False)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.status = message["status"]
            if self.pending:  # answered before the body was read: the rest is never read
                message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
        await self._send(message)


def sweep_period(timeout: float) -> float:
    """How often deadlines of ``timeout`` seconds are checked: a late head or body is
    answered within a quarter of the timeout (at most a second) after its deadline."""
    return min(timeout / 4, 1.0)


class _Watch:
    """The bodies being read now, and one task that cancels a read past its deadline. One
    task for all requests instead of a timer per read: a timer costs microseconds on every
    request, which the ingest benchmark shows; this costs a dictionary entry."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.waiting: dict[_Body, asyncio.Task[Any]] = {}
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the watch in the running loop, unless it runs there already."""
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(sweep_period(self.timeout))
            now = loop.time()
            for body, task in list(self.waiting.items()):
                if body.deadline is not None and now >= body.deadline and not body.late:
                    body.late = True
                    task.cancel()


def _too_big(limit: int) -> str:
    return f"the body is over the limit of {limit} bytes"


class BodyGuard:
    """Cap each request's body at ``limit`` bytes and ``timeout`` seconds as the app reads
    it; a ``Content-Length`` over the limit is refused before anything else. ``timed``: also
    observe each request's latency under its route template (never its raw path), from
    before the guard to the answer, with the status it answered (500 when it answered
    none). ``clients``: a request from a client address that has that many in flight
    already is answered 429 at once, and its connection closed.

    The latency is observed here rather than by a layer of its own around the guard: that
    layer was one more coroutine on every request and one more wrapper on each of its two
    sends, which showed in the receiver's profile (bench/README.md, "Receiver engine")."""

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        timeout: float,
        *,
        timed: bool = False,
        clients: Clients | None = None,
    ) -> None:
        self.app = app
        self.clients = clients
        self.limit = limit
        self.timeout = timeout
        self.timed = timed
        self.watch = _Watch(timeout)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter() if self.timed else 0.0
        status = 500
        clients, address = self.clients, _client(scope)
        try:
            if clients is not None and address is not None and not clients.take(address):
                refusal, clients, status = clients.refusal, None, 429
                await send_reply(refusal, send)
                return
            declared: bytes | None = None
            chunked = False
            for name, value in scope["headers"]:
                if name == b"content-length":
                    declared = value
                elif name == b"transfer-encoding":
                    chunked = True
            if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
                error = ApiError(413, "body_too_large", _too_big(self.limit), headers=_CLOSE_HEADER)
                status = 413
                await send_reply(Reply.error(error), send)
                return
            pending = chunked or (declared is not None and declared.strip(b"0") != b"")
            body = _Body(receive, send, self.limit, self.timeout, pending, self.watch)
            path = scope["path"]
            if "\n" in path and OPERATIONS in path:
                # A route's pattern matches before a final line break (``x/dispatch%0A`` would
                # be the dispatch of ``x``) and stops at an inner one (``a%0Ab`` would be a
                # bare 404): refused as an id, whatever the route; answered through the body's
                # ``send``, which closes a connection whose body is left unread.
                status = 422
                await send_reply(Reply.error(LINE_BREAK), body.send)
                return
            if pending:
                self.watch.start()
            try:
                await self.app(scope, body.receive, body.send)
            except ApiError as exc:  # a read the app did not catch: answer it if nothing was sent
                if body.started:
                    raise
                await send_reply(Reply.error(exc), body.send)
            finally:
                status = body.status
        finally:
            if clients is not None and address is not None:
                clients.give_back(address)
            if self.timed:
                route: Any = scope.get("route")
                template = getattr(route, "path", None) or "unmatched"
                request_latency(template, scope.get("method", "?"), status).observe(
                    time.perf_counter() - started
                )


_CLOSE_HEADER = {"Connection": "close"}


def _client(scope: Scope) -> str | None:
    """The client's address: the peer's, or the one a trusted proxy's ``X-Forwarded-For``
    names (uvicorn's proxy headers, ``[receiver] trusted_proxies``, set it in the scope)."""
    client = scope.get("client")
    return str(client[0]) if client else None
