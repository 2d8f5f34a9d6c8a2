"""The per-client cap on connections, counted where a connection begins: in the asyncio
protocol uvicorn serves it with, before a byte of its request is parsed. A client that sends
its request line and headers slowly (or never finishes them) is held there, where no ASGI app
sees it; counted here, the connection over its address's cap is answered 429 and closed as
soon as it is accepted, and never reaches uvicorn's count of ``max_connections``.

It wraps the HTTP protocol class uvicorn's ``Config`` chose (``Config.http`` takes a protocol
class as well as a name; the one ``"auto"`` means is known only after ``Config.load``),
delegating every call of asyncio's ``Protocol`` interface to it, and runs on either event
loop, asyncio's or uvloop's.

Connections from a trusted proxy (``[receiver] trusted_proxies``) are not counted here: they
carry many clients, whom the proxy's ``X-Forwarded-For`` names, and whose requests in flight
the body guard counts (:mod:`flowledger.receiver.api.guard`).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any, cast

from flowledger.plumbing.metrics import REFUSED_CONNECTIONS
from flowledger.receiver.api.clients import Clients
from flowledger.receiver.api.reply import JSON, Reply

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# How long a refused connection may stay after its 429 for its client to read it and close:
# closed at once, a connection whose client had already sent something is reset, and the
# 429 lost with it. It is no longer counted against anything meanwhile.
REFUSED_GRACE = 1.0  # seconds


class PerClient:
    """The connections each untrusted client address holds, at most ``cap`` each."""

    def __init__(self, cap: int, trusted: Iterable[str] = ()) -> None:
        self.clients = Clients(cap)
        self.trusted: list[Network] = [ipaddress.ip_network(t, strict=False) for t in trusted]
        self.refusal = raw_response(self.clients.refusal)
        # Parsing a peer's address and matching it against the networks takes microseconds:
        # once for each of the last addresses seen.
        self.counted_as = functools.lru_cache(maxsize=4096)(self._counted_as)

    def address(self, transport: asyncio.BaseTransport) -> str | None:
        """The client address a connection counts under; None for one that is not counted
        (from a trusted proxy, or over a UNIX socket)."""
        peer = transport.get_extra_info("peername")
        if not isinstance(peer, tuple) or not peer:
            return None
        return self.counted_as(str(peer[0]))

    def _counted_as(self, host: str) -> str | None:
        # Trusted as uvicorn trusts a peer's proxy headers: an IPv4 peer of a dual-stack
        # socket (::ffff:10.0.0.5) is not 10.0.0.5 to it either.
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return host
        return None if any(ip in network for network in self.trusted) else host

    def protocol(self, inner: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
        """A protocol class uvicorn instantiates as it would ``inner``, counting each
        connection under its client's address."""
        limit = self

        class Counted(_Counted):
            def __init__(self, **kwargs: Any) -> None:
                super().__init__(inner(**kwargs), limit)

        return Counted


class _Counted(asyncio.Protocol):
    """One connection: counted and handed to ``inner``, or refused (``inner`` None)."""

    __slots__ = ("address", "inner", "limit", "timer")

    def __init__(self, inner: asyncio.Protocol, limit: PerClient) -> None:
        self.inner: asyncio.Protocol | None = inner
        self.limit = limit
        self.address: str | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        address = self.limit.address(transport)
        if address is not None and not self.limit.clients.take(address):
            self.inner = None  # what the client sends now is read and dropped
            self.refuse(cast(asyncio.WriteTransport, transport))  # uvloop's is none by type
            return
        self.address = address
        assert self.inner is not None
        self.inner.connection_made(transport)

    def refuse(self, transport: asyncio.WriteTransport) -> None:
        REFUSED_CONNECTIONS.inc()
        transport.write(self.limit.refusal)
        if transport.can_write_eof():  # TCP: the answer, then the end of it
            transport.write_eof()
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(REFUSED_GRACE, transport.abort)
        else:  # TLS
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.address is not None:
            self.limit.clients.give_back(self.address)
            self.address = None
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()


def raw_response(reply: Reply) -> bytes:
    """``reply`` as the bytes of an HTTP/1.1 response."""
    head = [f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}"]
    head += [f"content-type: {JSON}", f"content-length: {len(reply.body)}"]
    head += [f"{k.lower()}: {v}" for k, v in reply.header_map().items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body
