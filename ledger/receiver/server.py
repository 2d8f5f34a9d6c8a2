"""Serving an app with uvicorn the way both ``serve`` and ``run`` do."""

from __future__ import annotations

import gc
import logging
import socket
import sys
from typing import Any

from ledger.receiver.logs import log_config
from ledger.storage.engine import LedgerError

# Everything imported and built before serving (frameworks, models, the app: about a million
# objects) is moved out of the collector's sight. Otherwise each full collection walks all of
# it, finds nothing to free, and stalls every request in flight for about 70 ms, which set
# the receiver's p99 latency. Objects made while serving are collected as usual.
#
# The writer thread releases the GIL on every SQLite call; with the default 5 ms switch
# interval each re-acquisition can wait that long behind the busy event loop (a convoy that
# made group commit CPU-idle). A short interval hands the GIL back promptly.
SWITCH_INTERVAL = 0.0005  # seconds


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


def serve_app(app: Any, sock: socket.socket, *, access_log: bool = True) -> None:
    """Run ``app`` on ``sock`` (see :func:`listen`) until SIGINT or SIGTERM (uvicorn's own
    handlers end the lifespan)."""
    import uvicorn

    sys.setswitchinterval(SWITCH_INTERVAL)
    config = uvicorn.Config(
        app,
        log_config=log_config(),
        access_log=access_log,
        server_header=False,
        workers=1,
        timeout_graceful_shutdown=10,
    )
    # Given a socket, uvicorn names no address; say it as it would.
    logging.getLogger("uvicorn.error").info("listening on %s (Ctrl+C to stop)", url(sock))
    config.load()  # imports the HTTP protocol and wraps the app: all of it frozen below
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run(sockets=[sock])
