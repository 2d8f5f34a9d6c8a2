"""Serving an app with uvicorn the way both ``serve`` and ``run`` do, through uvicorn's public
``Config`` and ``Server``, with its limits set here rather than left to uvicorn's defaults
(``[receiver]`` in ``flowledger.toml``, docs/settings.md):

- ``max_connections`` (uvicorn's ``limit_concurrency``): beyond it a request is answered 503
  at once instead of queueing without bound;
- ``keep_alive`` (``timeout_keep_alive``): an idle keep-alive connection is closed after it;
- the body's limit and timeout are the app's (:mod:`flowledger.receiver.api.guard`).

The request's line and headers (its "head") are bounded in size by uvicorn's h11 parser
(``h11_max_incomplete_event_size``), not by its httptools parser, which the receiver uses when
it is installed because it is faster; neither bounds the time a head may take. Those two bounds
belong to the reverse proxy in front (docs/production.md: nginx's
``large_client_header_buffers`` and ``client_header_timeout``, Caddy's ``max_header_size``
and ``read_header`` timeout), as does TLS.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from flowledger.config import ReceiverConfig
from flowledger.domain.redact import NO_SECRETS
from flowledger.receiver.engine.tuning import quiet_collector, short_switches
from flowledger.receiver.engine.writer_process import WriterEnded
from flowledger.receiver.logs import Known, log_config
from flowledger.storage.engine import LedgerError

HEAD_LIMIT = 16 * 1024  # bytes of request line and headers for h11 (its own default)


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
    short_switches()
    config = uvicorn.Config(
        app,
        log_config=log_config(secrets=secrets),
        access_log=access_log,
        server_header=False,
        workers=1,
        timeout_graceful_shutdown=10,
        http="auto",  # httptools, which is installed with the receiver; else h11
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
