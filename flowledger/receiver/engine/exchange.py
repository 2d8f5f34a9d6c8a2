"""The workflow calls served from the HTTP parser's callbacks: no ASGI task, scope or message
per request.

Under ASGI, uvicorn makes a task, a cycle, an event and two messages for every request, and
the write lane's layers (body guard, latency timer) wrap its receive and send: the server's
own share of the receiver's CPU was more than the lane's (bench/README.md, "Receiver
engine"). Here the connection's protocol
(:func:`~flowledger.receiver.engine.server.bounded_head_protocol`) hands a POST to a
workflow call's path to an :class:`Exchange` as soon as its head is parsed; the exchange
checks the token on the head, gathers the body from the parser, runs the write lane's own
steps (:meth:`WriteLane.start`) and writes the answer in one piece when the writer's future
is done. The steps, their order, the answers, the latency metric and the access log line
are the lane's and uvicorn's.

Only the usual request is taken so: HTTP/1.1, a ``Content-Length`` within the body limit and
no other framing, no ``Expect``, no upgrade, no proxy headers to apply, an idle connection.
Anything else goes the ASGI way, which answers it as before.
"""

from __future__ import annotations

import asyncio
import math
import time
import urllib.parse
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

import httptools
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from flowledger.metrics import request_latency
from flowledger.receiver.api.auth import Admission, admit, admit_now
from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.engine.lane import INCOMPLETE_BODY, LANE_HEADERS, WriteLane, refusal
from flowledger.receiver.engine.reply import Reply

if TYPE_CHECKING:
    from flowledger.receiver.api.routes.calls import Call

_PROXY = frozenset((b"x-forwarded-for", b"x-forwarded-proto"))


def lane_of(app: Any) -> WriteLane | None:
    """The write lane of the receiver that ``app`` is, or that uvicorn's proxy headers
    middleware wraps (the exchange applies those headers itself: :func:`take`). None for any
    other app, or one wrapped in anything else (uvicorn's message logger at its ``trace``
    level, say): its requests all go the ASGI way."""
    if isinstance(app, ProxyHeadersMiddleware):
        app = app.app
    lane = getattr(app, "write_lane", None)
    return lane if isinstance(lane, WriteLane) else None


class _Unheard:
    """What uvicorn's protocol sets when the connection is lost: nothing here waits on it."""

    __slots__ = ()

    def set(self) -> None:
        pass


_UNHEARD = _Unheard()


class Exchange:
    """One workflow call on one connection, from its parsed head to its answer. It stands in
    for uvicorn's request cycle (``protocol.cycle``) while it runs, with the attributes the
    protocol reads of one: whether the answer is complete, whether the connection is kept
    alive (a graceful shutdown turns that off), whether the client went away."""

    __slots__ = (
        "admission",
        "body",
        "call",
        "complete",
        "deadline",
        "disconnected",
        "headers",
        "keep_alive",
        "lane",
        "params",
        "protocol",
        "response_complete",
        "route",
        "scope",
        "size",
        "started",
        "timeout",
    )

    message_event = _UNHEARD

    def __init__(
        self,
        protocol: Any,
        lane: WriteLane,
        matched: tuple[Call, dict[str, str], Any],
        headers: dict[str, str],
        timeout: float,
    ) -> None:
        self.protocol = protocol
        self.lane = lane
        self.call, self.params, self.route = matched
        self.scope = protocol.scope
        self.headers = headers
        self.started = time.perf_counter()  # the latency, as the body guard times it
        self.timeout = timeout
        # The whole body by then, or 408: counted from the token's admission, as the body
        # guard counts from the first read, which follows it.
        self.deadline = math.inf
        self.body: list[bytes] = []
        self.size = 0  # bytes of the body so far
        self.complete = False  # the whole body arrived
        self.admission: Admission | None = None
        self.keep_alive = protocol.parser.should_keep_alive()
        self.response_complete = False
        self.disconnected = False

    # The protocol's callbacks.

    def begin(self) -> None:
        """The head is parsed: the token checked on it, before a byte of the body is read
        (waiting for the token cache only when it must be read again)."""
        headers = self.headers
        try:
            self.admission = admit_now(
                self.lane.state,
                "write",
                authorization=headers.get("authorization"),
                signature=headers.get("signature"),
            )
        except Exception as exc:
            self.refuse(refusal(exc))
            return
        if self.admission is not None:
            self.deadline = self.protocol.loop.time() + self.timeout
        else:
            waiting = admit(
                self.lane.state,
                "write",
                authorization=headers.get("authorization"),
                signature=headers.get("signature"),
            )
            asyncio.ensure_future(waiting).add_done_callback(self._admitted)

    def on_body(self, data: bytes) -> None:
        self.body.append(data)
        self.size += len(data)
        if self.admission is None and self.size > HIGH_WATER_LIMIT:
            # The token is still being looked up: hold no more than the ASGI way would.
            self.protocol.flow.pause_reading()

    def on_complete(self) -> None:
        self.complete = True
        if self.admission is not None:
            self._start()

    def late(self, now: float) -> None:
        """The connections' sweep: a body not whole by its deadline is answered 408."""
        if not self.complete and not self.response_complete and now >= self.deadline:
            message = f"the body did not arrive within {self.timeout:g} s"
            self.refuse(Reply.error(ApiError(408, "body_timeout", message)))

    def lost(self) -> None:
        """The connection closed before the answer. Before the call was handed over (the
        body not whole, or the token still being looked up) nothing is written, as under
        ASGI, where the lane then reads a disconnect: what it answers a body cut short is
        still counted, though nobody reads it."""
        self.disconnected = True
        if (not self.complete or self.admission is None) and not self.response_complete:
            self.response_complete = True
            self._observe(INCOMPLETE_BODY.status)

    # The steps.

    def _admitted(self, future: asyncio.Future[Admission]) -> None:
        if self.response_complete:  # answered meanwhile (the client went, or was too slow)
            if not future.cancelled():
                future.exception()  # a refusal nobody hears: not logged as never retrieved
            return
        try:
            self.admission = future.result()
        except (Exception, asyncio.CancelledError) as exc:
            self.refuse(refusal(exc))
            return
        self.deadline = self.protocol.loop.time() + self.timeout
        if self.complete:
            self._start()
        else:
            self.protocol.flow.resume_reading()

    def _start(self) -> None:
        assert self.admission is not None
        body = b"".join(self.body)
        self.body = []
        lane = self.lane
        outcome = lane.start(self.call, self.params, self.scope, self.headers, self.admission, body)
        if isinstance(outcome, Reply):
            self.answer(lane.observed(self.call, outcome))
            return
        written = asyncio.ensure_future(outcome)
        # Among the server's tasks, as an ASGI request's task is: a graceful stop waits for
        # it (until its timeout, when it cancels it) even once its client has gone, and
        # ``limit_concurrency`` counts it.
        tasks = self.protocol.tasks
        tasks.add(written)
        written.add_done_callback(tasks.discard)
        written.add_done_callback(self._written)

    def _written(self, future: Awaitable[Reply]) -> None:
        assert isinstance(future, asyncio.Future)
        try:
            reply = future.result()
        except (Exception, asyncio.CancelledError) as exc:
            reply = refusal(exc)
        self.answer(self.lane.observed(self.call, reply))

    def refuse(self, reply: Reply) -> None:
        """Answer before the body was read whole, and close: the rest is never read."""
        self.keep_alive = False
        self.answer(reply)

    def answer(self, reply: Reply) -> None:
        """Write the answer in one piece (as uvicorn writes it, its default headers first),
        then let the connection go on to its next request, or close it."""
        if self.response_complete:
            return
        self.response_complete = True
        protocol = self.protocol
        status = reply.status
        self._observe(status)
        if self.disconnected:  # nobody to answer, and no line logged (as uvicorn's cycle)
            return
        if protocol.access_log:
            scope = self.scope
            protocol.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        transport = protocol.transport
        if transport.is_closing():
            return
        parts = [STATUS_LINE[status]]
        for name, value in protocol.server_state.default_headers:
            parts += (name, b": ", value, b"\r\n")
        closing = False
        for name, value in reply.raw_headers():
            if name == b"connection" and b"close" in value.lower():
                closing = True
            parts += (name, b": ", value, b"\r\n")
        if closing:
            self.keep_alive = False
        elif not self.keep_alive:
            parts.append(b"connection: close\r\n")
        parts += (b"\r\n", reply.body)
        transport.write(b"".join(parts))
        if not self.keep_alive:
            if self.complete:
                transport.close()
            else:
                protocol.refused = True  # the rest of the body is never parsed
                protocol.close_after_answer()
        protocol.on_response_complete()

    def _observe(self, status: int) -> None:
        elapsed = time.perf_counter() - self.started
        request_latency(self.route.path, "POST", status).observe(elapsed)


def take(protocol: Any, lane: WriteLane, timeout: float) -> Exchange | None:
    """An :class:`Exchange` for the request whose head ``protocol`` just parsed, begun, when
    it is a workflow call as usual (the module's docstring); else None, and nothing of the
    protocol touched: it goes on the ASGI way."""
    parser = protocol.parser
    if parser.get_method() != b"POST" or parser.get_http_version() != "1.1":
        return None
    cycle = protocol.cycle
    if protocol.pipeline or (cycle is not None and not cycle.response_complete):
        return None  # an answer is still owed on this connection: in order, the ASGI way
    if protocol.expect_100_continue or protocol.root_path or parser.should_upgrade():
        return None
    limit = protocol.limit_concurrency
    if limit is not None and (len(protocol.connections) >= limit or len(protocol.tasks) >= limit):
        return None  # uvicorn answers 503
    url = protocol.url
    if url[:1] == b"/" and b"?" not in url and b"#" not in url:
        raw_path, query = url, b""  # the usual target: a path alone, nothing to parse
    else:
        parsed = httptools.parse_url(url)
        raw_path, query = parsed.path, parsed.query or b""
    try:
        path = raw_path.decode("ascii")
    except UnicodeDecodeError:
        return None
    if "%" in path:
        path = urllib.parse.unquote(path)
    if "\n" in path:
        return None
    matched = lane.match(path)
    if matched is None:
        return None
    declared: bytes | None = None
    headers: dict[str, str] = {}
    for name, value in protocol.headers:  # lowercased by the protocol
        wanted = LANE_HEADERS.get(name)
        if wanted is not None:
            if wanted not in headers:
                headers[wanted] = value.decode("latin-1")
        elif name == b"content-length":
            if declared is not None:
                return None
            declared = value
        elif name == b"transfer-encoding" or (name in _PROXY and _proxied(protocol)):
            return None
    if declared is None or not declared.isdigit():
        return None
    if not 0 < int(declared) <= lane.state.body_limit:
        return None
    scope = protocol.scope
    scope["method"] = "POST"
    scope["path"] = path
    scope["raw_path"] = raw_path
    scope["query_string"] = query
    exchange = Exchange(protocol, lane, matched, headers, timeout)
    protocol.cycle = exchange
    exchange.begin()
    return exchange


def _proxied(protocol: Any) -> bool:
    """Whether uvicorn's proxy headers middleware would take the client from the headers."""
    app = protocol.app
    if not isinstance(app, ProxyHeadersMiddleware):
        return False
    client = protocol.client
    return client is not None and client[0] in app.trusted_hosts
