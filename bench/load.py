"""The load generator: keep-alive clients on asyncio protocols sending dispatch+confirm pairs
(signed when the token has a key)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import threading
import time

Token = tuple[str, bytes | None]  # the bearer token, and its signing key when it signs


def signature(path: str, body: bytes, key: bytes) -> str:
    """The ``X-Flowledger-Signature`` of a POST (v2: HMAC-SHA256 of "t.METHOD.PATH.body")."""
    stamp = int(time.time())
    digest = hmac.new(key, f"{stamp}.POST.{path}.".encode() + body, hashlib.sha256)
    return f"t={stamp},v2={digest.hexdigest()}"


def pair(i: int) -> tuple[bytes, bytes]:
    """The bodies of pair ``i``'s dispatch and confirm."""
    dispatch = (
        f'{{"processing_version":"v1","execution_id":"e-{i}","run_index":0,'
        f'"input":{{"n":{i},"what":"bench"}}}}'
    ).encode()
    return dispatch, f'{{"receipt":"R-{i}"}}'.encode()


def _request(path: str, body: bytes, token: str, key: bytes | None) -> bytes:
    """One POST as a workflow sends it, signed when ``key`` is given."""
    signed = "" if key is None else f"X-Flowledger-Signature: {signature(path, body, key)}\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n{signed}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


class _Client(asyncio.Protocol):
    """A kept-alive connection that sends a request and waits for its whole answer. A protocol
    rather than asyncio's streams: the load generator shares the machine's two cores with the
    receivers, and reading each answer line by line through a stream cost it 51 µs of CPU a
    transition against 39-44 µs this way (``client CPU`` below, one run each)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiting: asyncio.Future[bytes] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiting is None:
            return
        length = 0
        for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        answer = bytes(self.buffer[: end + 4 + length])
        del self.buffer[: end + 4 + length]
        waiting, self.waiting = self.waiting, None
        waiting.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(exc or ConnectionError("the receiver closed the connection"))

    async def send(self, request: bytes) -> bytes:
        assert self.transport is not None
        self.waiting = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        answer = await self.waiting
        if not answer.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(repr(answer))
        return answer


async def _client(port: int, token: Token, ops: list[int], latencies: list[float], run: str) -> int:
    loop = asyncio.get_running_loop()
    transport, conn = await loop.create_connection(_Client, "127.0.0.1", port)
    done = 0
    try:
        for i in ops:
            op = f"/v1/operations/{run}-{i}"
            dispatch, confirm = pair(i)
            t0 = time.perf_counter()
            answer = await conn.send(_request(f"{op}/dispatch", dispatch, *token))
            t1 = time.perf_counter()
            assert b'"decision":"go"' in answer, answer
            confirmed = await conn.send(_request(f"{op}/confirm", confirm, *token))
            t2 = time.perf_counter()
            assert b'"state":"confirmed"' in confirmed, confirmed
            latencies.extend((t1 - t0, t2 - t1))
            done += 2
    finally:
        transport.close()
    return done


async def drive(
    ports: list[int], token: Token, pairs: int, clients: int, run: str
) -> tuple[int, float, list[float]]:
    """Client ``c`` talks to ``ports[c % len(ports)]``: several receivers share the load."""
    latencies: list[float] = []
    shares = [list(range(c, pairs, clients)) for c in range(clients)]
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(_client(ports[c % len(ports)], token, s, latencies, run) for c, s in enumerate(shares))
    )
    return sum(counts), time.perf_counter() - started, latencies


async def until(
    port: int, token: Token, clients: int, run: str, stop: threading.Event
) -> list[tuple[float, float]]:
    """Dispatch+confirm pairs from ``clients`` keep-alive clients until ``stop`` is set; each
    request as (when its answer came, ``time.monotonic()``; its latency in seconds)."""
    timings: list[tuple[float, float]] = []

    async def client(c: int) -> None:
        loop = asyncio.get_running_loop()
        transport, conn = await loop.create_connection(_Client, "127.0.0.1", port)
        try:
            i = c
            while not stop.is_set():
                op = f"/v1/operations/{run}-{i}"
                for path, body in zip(("dispatch", "confirm"), pair(i), strict=True):
                    t0 = time.monotonic()
                    await conn.send(_request(f"{op}/{path}", body, *token))
                    t1 = time.monotonic()
                    timings.append((t1, t1 - t0))
                i += clients
        finally:
            transport.close()

    await asyncio.gather(*(client(c) for c in range(clients)))
    return timings
