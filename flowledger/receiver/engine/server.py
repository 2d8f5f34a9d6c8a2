"""Serving an app with uvicorn the way both ``serve`` and ``run`` do, with its limits set here
rather than left to uvicorn's defaults (``[receiver]`` in ``flowledger.toml``, README):

- ``max_connections`` (uvicorn's ``limit_concurrency``): beyond it a request is answered 503
  at once instead of queueing without bound;
- ``keep_alive`` (``timeout_keep_alive``): an idle keep-alive connection is closed after it;
- a request's line and headers (its "head") must arrive within ``body_timeout`` and fit in
  :data:`HEAD_LIMIT` bytes, or the connection gets 408 or 431 and is closed. uvicorn's
  httptools parser has neither bound (it accepts headers of any size, and waits for them
  forever), so :class:`BoundedHead` adds both; its h11 parser is bounded by
  ``h11_max_incomplete_event_size``, set to the same size;
- the body's limit and timeout are the app's (:mod:`flowledger.receiver.engine.middleware`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
from typing import Any

from flowledger.config import ReceiverConfig
from flowledger.domain.redact import NO_SECRETS
from flowledger.receiver.api.errors import error_body
from flowledger.receiver.engine.middleware import sweep_period
from flowledger.receiver.engine.reply import dumps
from flowledger.receiver.engine.writer_process import WriterEnded
from flowledger.receiver.logs import Known, log_config
from flowledger.storage.engine import LedgerError

# Measurements behind these settings: bench/README.md, "Receiver engine".
#
# Everything built before serving is frozen out of the collector's sight (``serve_app``, and
# the writer process before it takes its first batch: :func:`quiet_collector`): a full
# collection walking it found nothing to free and stalled every request in flight.
#
# The writer thread releases the GIL on every SQLite call; at the default interval each
# re-acquisition can wait that long behind the busy event loop. A short one hands it back.
SWITCH_INTERVAL = 0.0005  # seconds

# The youngest generation waits for 50,000 new containers, not 700: a request makes a few
# hundred that reference counting frees, so the default ran it every few requests for nothing.
GC_THRESHOLD = (50_000, 20, 100)
HEAD_LIMIT = 16 * 1024  # bytes of request line and headers (h11's own default)


def quiet_collector() -> None:
    """Before serving: everything built so far frozen out of the collector's sight, and the
    youngest generation at :data:`GC_THRESHOLD`."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


class CannotListen(LedgerError):
    """The address to serve on cannot be had: taken, not this machine's, or not an address."""


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``, bound before anything is printed or started,
    so a port that is taken or a host that is not this machine's is one line and nothing else.
    ``SO_REUSEADDR`` as uvicorn's own binding sets it (a restart does not wait out TIME_WAIT);
    the first address the host resolves to, as a listening server takes one."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise CannotListen(f"cannot listen on {_where(host, port)}: {_reason(exc)}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise CannotListen(f"cannot listen on {_where(host, port)}: {_reason(exc)}") from None
    return sock


def url(sock: socket.socket) -> str:
    """Where ``sock`` answers (the port it really got, when asked for port 0)."""
    host, port = sock.getsockname()[:2]
    return f"http://{_where(host, port)}"


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)).lower()


def _refusal(status: int, reason: str, code: str, message: str) -> bytes:
    body = dumps(error_body(code, message))
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def bounded_head_protocol(timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with :class:`BoundedHead`'s bounds, ``timeout`` seconds,
    serving the workflow calls from its callbacks (:mod:`~flowledger.receiver.engine.exchange`)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from flowledger.receiver.engine.exchange import Exchange, lane_of, take

    class BoundedHead(HttpToolsProtocol):
        """A head over :data:`HEAD_LIMIT` bytes is refused with 431; one that has not arrived
        whole ``timeout`` seconds after the connection opened or its request began is
        refused with 408. Either closes the connection, and nothing more from it is parsed.

        The time is checked by one task for all connections, a few times per timeout, not by
        a timer per request (a timer costs microseconds on every request, which the ingest
        benchmark shows). The size is counted on the reads after which the head is still
        incomplete (one endless header, which the parser buffers without a callback), and
        when a head ends within a read that could hold more than the limit, exactly."""

        head_timeout = timeout
        sweeper: asyncio.Task[None] | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.lane = lane_of(self.app)  # the workflow calls served from the callbacks
            self.unparsed = self.read = 0
            self.in_head = True  # a new connection owes the head of its first request
            self.head_since = self.loop.time()
            self.refused = False
            cls = type(self)
            if cls.sweeper is None or cls.sweeper.done():
                cls.sweeper = self.loop.create_task(_sweep(self.connections, timeout))

        def data_received(self, data: bytes) -> None:
            if self.refused:
                return
            self.read = len(data)
            super().data_received(data)
            if self.in_head and not self.refused:
                self.unparsed += len(data)
                self.check_size(self.unparsed)

        def on_message_begin(self) -> None:
            # An exchange answered from the parser's callbacks (a refusal) arms the keep-alive
            # timer mid-read: a request that follows in the same read is no idle connection.
            self._unset_keepalive_if_required()
            super().on_message_begin()
            self.in_head, self.unparsed = True, 0
            self.head_since = self.loop.time()

        def on_headers_complete(self) -> None:
            self.in_head = False
            if self.unparsed + self.read > HEAD_LIMIT:  # the head may be over: count it
                self.check_size(len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers))
            if not self.refused:
                if self.lane is not None and take(self, self.lane, self.head_timeout):
                    return
                before = self.cycle
                super().on_headers_complete()
                cycle = self.cycle
                if cycle is not before and cycle is not None and self.scope["method"] != "HEAD":
                    cycle.transport = OneWrite(self.transport)  # type: ignore[assignment]

        def on_body(self, body: bytes) -> None:
            if not self.refused:
                cycle = self.cycle
                if type(cycle) is Exchange:
                    cycle.on_body(body)
                else:
                    super().on_body(body)

        def on_message_complete(self) -> None:
            if not self.refused:
                cycle = self.cycle
                if type(cycle) is Exchange:
                    cycle.on_complete()
                else:
                    super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            cycle = self.cycle
            if type(cycle) is Exchange:
                cycle.lost()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            """A request the parser refuses (a bad request line, chunk size or framing), in
            the one error shape rather than uvicorn's plain text; closes the connection."""
            message = "the request is not valid HTTP/1.1"
            self.refuse(_refusal(400, "Bad Request", "invalid_http", message))

        def check_size(self, size: int) -> None:
            if size > HEAD_LIMIT and not self.refused:
                message = f"the request line and headers are over {HEAD_LIMIT} bytes"
                self.refuse(
                    _refusal(431, "Request Header Fields Too Large", "head_too_large", message)
                )

        def head_too_slow(self, now: float) -> None:
            cycle = self.cycle
            if type(cycle) is Exchange:
                cycle.late(now)
            late = now - self.head_since >= self.head_timeout
            if late and self.in_head and not self.refused and not self.transport.is_closing():
                message = f"the request's headers did not arrive within {self.head_timeout:g} s"
                self.refuse(_refusal(408, "Request Timeout", "head_timeout", message))

        def refuse(self, answer: bytes) -> None:
            self.refused = True
            self.transport.write(answer)
            self.close_after_answer()

        def close_after_answer(self) -> None:
            if self.transport.can_write_eof():
                # The answer, then end of stream; what the client still sends is read and
                # dropped until it closes (or for one more timeout): closing with unread
                # bytes would reset the connection, and a reset can lose the answer.
                self.transport.write_eof()
                self.loop.call_later(self.head_timeout, self.transport.close)
            else:
                self.transport.close()

    return BoundedHead


class OneWrite:
    """The connection as one request's answer writes to it: the status line and headers are
    held until the body's first write, and go out with it in one. uvloop writes to the socket
    at once, holding the interpreter lock, so the two writes of an answer were two system
    calls and two TCP segments. Anything else the answer does (closing the connection, a
    ``100 Continue`` ahead of the head) passes straight on, a held head first. Not for a
    ``HEAD`` request, whose answer writes no body."""

    __slots__ = ("_head", "_state", "_transport")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._head = b""
        self._state = 0  # 0: the head is still to come, 1: held, 2: written

    def write(self, data: bytes) -> None:
        state = self._state
        if state == 0 and not data.startswith(_CONTINUE):
            self._head, self._state = data, 1
        elif state == 1:
            head, self._head, self._state = self._head, b"", 2
            self._transport.write(head + data)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        if self._state == 1:
            head, self._head, self._state = self._head, b"", 2
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        self.flush()
        return getattr(self._transport, name)


_CONTINUE = b"HTTP/1.1 100 "


async def _sweep(connections: set[Any], timeout: float) -> None:
    """Refuse every connection whose head is late, checking a few times per ``timeout``."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(sweep_period(timeout))
        now = loop.time()
        for connection in list(connections):
            too_slow = getattr(connection, "head_too_slow", None)
            if too_slow is not None:
                too_slow(now)


def serve_app(
    app: Any,
    sock: socket.socket,
    *,
    access_log: bool = True,
    secrets: Known = NO_SECRETS,
    limits: ReceiverConfig | None = None,
) -> None:
    """Run ``app`` on ``sock`` (see :func:`listen`) until SIGINT or SIGTERM (uvicorn's own
    handlers end the lifespan); every log line is redacted with ``secrets`` (or those it
    returns as they are when the line is logged)."""
    import uvicorn

    limits = limits or ReceiverConfig()
    sys.setswitchinterval(SWITCH_INTERVAL)
    config = uvicorn.Config(
        app,
        log_config=log_config(secrets=secrets),
        access_log=access_log,
        server_header=False,
        workers=1,
        timeout_graceful_shutdown=10,
        http=protocol(limits),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=max(1, round(limits.keep_alive.total_seconds())),
        h11_max_incomplete_event_size=HEAD_LIMIT,
    )
    # Given a socket, uvicorn names no address; say it as it would.
    logging.getLogger("uvicorn.error").info("listening on %s (Ctrl+C to stop)", url(sock))
    config.load()  # imports the HTTP protocol and wraps the app: all of it frozen below
    quiet_collector()
    server = uvicorn.Server(config)
    receiver = getattr(getattr(app, "state", None), "receiver", None)
    if receiver is not None:  # a writer process that ends stops serving, as SIGTERM would
        receiver.engine.stop = lambda: setattr(server, "should_exit", True)
    server.run(sockets=[sock])


def writer_ended(app: Any) -> None:
    """After serving: raise :class:`WriterEnded` (a one-line error, exit status 2) when the
    receiver stopped because its writer process ended, for a supervisor to start it again."""
    ended = app.state.receiver.engine.ended
    if ended is not None:
        raise WriterEnded(f"stopped: the writer process ended ({ended})")


def protocol(limits: ReceiverConfig) -> Any:
    """httptools with bounds on the head when it is installed (it is faster), else h11
    (bounded by ``h11_max_incomplete_event_size``)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return bounded_head_protocol(limits.body_timeout.total_seconds())
