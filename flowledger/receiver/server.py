"""Serving an app with uvicorn the way both ``serve`` and ``run`` do, through uvicorn's public
``Config`` and ``Server``, with its limits set here rather than left to uvicorn's defaults
(``[receiver]`` in ``flowledger.toml``, docs/settings.md):

- ``max_connections`` (uvicorn's ``limit_concurrency``): beyond it a request is answered 503
  at once instead of queueing without bound;
- ``keep_alive`` (``timeout_keep_alive``): an idle keep-alive connection is closed after it;
- ``max_connections_per_client``: what one client address may hold of those connections
  (:mod:`flowledger.receiver.connections`), the rest refused at once;
- ``trusted_proxies`` (uvicorn's ``forwarded_allow_ips``): the proxies whose
  ``X-Forwarded-For`` names the client, whose requests in flight are then capped instead;
- the body's limit and timeout are the app's (:mod:`flowledger.receiver.api.guard`).

The request's line and headers (its "head") are bounded in size by uvicorn's h11 parser
(``h11_max_incomplete_event_size``), not by its httptools parser, which the receiver uses when
it is installed because it is faster; neither bounds the time a head may take. Those two bounds
belong to the reverse proxy in front (docs/production.md: nginx's
``large_client_header_buffers`` and ``client_header_timeout``, Caddy's ``max_header_size``
and ``read_header`` timeout).

TLS is either the proxy's or uvicorn's own (``--tls-cert`` and ``--tls-key``, uvicorn's
``ssl_certfile`` and ``ssl_keyfile``), the files checked by :func:`tls_files` before the port is
bound. Served on anything but loopback without it, the receiver says so in one warning line.

This module loads what serving needs (the per-client counts, the writer process's end) only
when it serves: ``serve`` and ``run`` check their TLS files, and ``serve`` binds its port, before
the receiver and the ledger's services are imported, so a mistake there is one line at once.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from flowledger.config import ReceiverConfig
from flowledger.domain.redact import NO_SECRETS
from flowledger.receiver.engine.tuning import quiet_collector, short_switches
from flowledger.receiver.logs import Known, log_config
from flowledger.storage.problems import LedgerError

HEAD_LIMIT = 16 * 1024  # bytes of request line and headers for h11 (its own default)


class CannotListen(LedgerError):
    """The address to serve on cannot be had: taken, not this machine's, or not an address."""


class BadTls(LedgerError):
    """The TLS certificate or key cannot be served with: missing, unreadable, not PEM,
    encrypted, or not a pair."""


@dataclass(frozen=True)
class Tls:
    """A certificate (with its chain, leaf first) and its private key, both PEM files."""

    cert: Path
    key: Path


# The settings that give a receiver's TLS files, named where one is missing.
RECEIVER_TLS = ("[receiver] tls_cert", "[receiver] tls_key")


def tls_files(
    cert: Path | None, key: Path | None, settings: tuple[str, str] | None = RECEIVER_TLS
) -> Tls | None:
    """The TLS files to serve with, checked as the server will load them, or None for plain
    HTTP when neither is given; :class:`BadTls` (one line) when only one is given, when
    either cannot be read, is not PEM of its kind, when the key is encrypted (uvicorn would
    ask for its password on a terminal), or when the key is not the certificate's."""
    if cert is None and key is None:
        return None
    if key is None:
        where = f" ({settings[1]})" if settings else ""
        raise BadTls(f"a TLS certificate needs its key: give --tls-key{where}")
    if cert is None:
        where = f" ({settings[0]})" if settings else ""
        raise BadTls(f"a TLS key needs its certificate: give --tls-cert{where}")
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        x509.load_pem_x509_certificates(_read(cert, "certificate"))
    except ValueError:
        raise BadTls(f"the TLS certificate {cert} holds no PEM certificate") from None
    try:
        serialization.load_pem_private_key(_read(key, "key"), password=None)
    except TypeError:  # a password is needed
        raise BadTls(
            f"the TLS key {key} is encrypted: give it unencrypted (readable by the ledger's "
            "user only)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise BadTls(f"the TLS key {key} holds no PEM private key the server can use") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=_no_password)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise BadTls(f"the TLS key {key} is not the key of the certificate {cert}") from None
        why = _OPENSSL_SAYS.get(exc.reason or "", (exc.reason or str(exc)).lower())
        raise BadTls(f"cannot serve with the TLS certificate {cert} and key {key}: {why}") from None
    except OSError as exc:
        raise BadTls(f"cannot read the TLS files {cert} and {key}: {_reason(exc)}") from None
    return Tls(cert, key)


# OpenSSL's reasons for refusing a pair (at the machine's security level), in plain words.
_OPENSSL_SAYS = {
    "EE_KEY_TOO_SMALL": "the certificate's key is too small (RSA needs 2048 bits or more)",
    "CA_MD_TOO_WEAK": "the certificate is signed with too weak a digest (SHA-1 or MD5)",
}


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BadTls(f"cannot read the TLS {what} {path}: {_reason(exc)}") from None


def _no_password() -> NoReturn:
    raise BadTls("the TLS key is encrypted")


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


def url(sock: socket.socket, tls: Tls | None = None) -> str:
    """Where ``sock`` answers (the port it really got, when asked for port 0)."""
    host, port = sock.getsockname()[:2]
    return f"{'https' if tls else 'http'}://{_where(host, port)}"


def loopback(sock: socket.socket) -> bool:
    """Whether ``sock`` is bound to a loopback address (127.0.0.0/8, ::1), which only this
    machine reaches."""
    try:
        return ipaddress.ip_address(sock.getsockname()[0]).is_loopback
    except ValueError:
        return False


# Not "bearer tokens": the log redactor takes the word after "bearer" for a credential.
CLEAR_TEXT = (
    "serving on %s without TLS: API tokens would cross the network in clear text; give "
    "--tls-cert and --tls-key, or keep it on 127.0.0.1 behind a TLS proxy (docs/production.md)"
)


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
    tls: Tls | None = None,
    clear_text: str = CLEAR_TEXT,
) -> None:
    """Run ``app`` on ``sock`` (see :func:`listen`) until SIGINT or SIGTERM (uvicorn's own
    handlers end the lifespan), over TLS with ``tls`` (see :func:`tls_files`); every log line
    is redacted with ``secrets`` (or those it returns as they are when the line is logged).
    Without TLS on anything but loopback, one warning line says so first (``clear_text``,
    given the address: what would cross the network in clear)."""
    import uvicorn

    from flowledger.receiver.connections import PerClient

    limits = limits or ReceiverConfig()
    short_switches()
    config = uvicorn.Config(
        app,
        log_config=log_config(secrets=secrets, log_format=limits.log_format),
        access_log=access_log,
        server_header=False,
        workers=1,
        timeout_graceful_shutdown=10,
        http="auto",  # httptools, which is installed with the receiver; else h11
        limit_concurrency=limits.max_connections,
        proxy_headers=True,
        forwarded_allow_ips=limits.trusted_proxies,
        ws="none",  # an upgrade would take the connection from its per-client count
        timeout_keep_alive=max(1, round(limits.keep_alive.total_seconds())),
        h11_max_incomplete_event_size=HEAD_LIMIT,
        ssl_certfile=tls.cert if tls else None,
        ssl_keyfile=tls.key if tls else None,
    )
    # Given a socket, uvicorn names no address; say it as it would.
    log = logging.getLogger("uvicorn.error")
    if tls is None and not loopback(sock):
        log.warning(clear_text, _where(*sock.getsockname()[:2]))
    log.info("listening on %s (Ctrl+C to stop)", url(sock, tls))
    config.load()  # imports the HTTP protocol and wraps the app: all of it frozen below
    # Server makes each connection's protocol from the class load() chose for ``http``:
    # counted per client before uvicorn's own sees a byte (receiver/connections.py).
    per_client = PerClient(limits.max_connections_per_client, limits.trusted_proxies)
    config.http_protocol_class = per_client.protocol(config.http_protocol_class)
    quiet_collector()
    server = uvicorn.Server(config)
    receiver = getattr(getattr(app, "state", None), "receiver", None)
    if receiver is None:
        server.run(sockets=[sock])
        return
    # A writer process that ends stops serving, as SIGTERM would.
    receiver.engine.stop = lambda: setattr(server, "should_exit", True)
    refused = _RefusedStart(receiver.engine)
    log.addFilter(refused)
    try:
        server.run(sockets=[sock])
    except SystemExit:  # uvicorn's exit for a start that failed
        if receiver.engine.refused is not None:
            raise receiver.engine.refused from None
        raise
    finally:
        log.removeFilter(refused)


class _RefusedStart(logging.Filter):
    """Leaves out the traceback uvicorn logs when the engine refused to start (its writer
    process could not open the ledger): :func:`serve_app` raises the refusal, one line."""

    def __init__(self, engine: Any) -> None:
        super().__init__()
        self.engine = engine

    def filter(self, record: logging.LogRecord) -> bool:
        return self.engine.refused is None or not record.getMessage().startswith("Traceback")


def writer_ended(app: Any) -> None:
    """After serving: raise :class:`WriterEnded` (a one-line error, exit status 2) when the
    receiver stopped because its writer process ended, for a supervisor to start it again."""
    from flowledger.receiver.engine.writer_process import WriterEnded

    ended = app.state.receiver.engine.ended
    if ended is not None:
        raise WriterEnded(f"stopped: the writer process ended ({ended})")
