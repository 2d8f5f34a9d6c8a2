"""The HTTP server's own CPU per request, answering a fixed body.

What the receiver's event loop would spend if the ledger cost nothing.

    python -m bench.http_floor [--requests 16000] [--clients 64]

Serves, with :func:`flowledger.receiver.server.serve_app` (uvicorn with the receiver's
protocol, limits, collector and switch interval), an ASGI app that reads each body whole and
answers a fixed dispatch answer; then, in the same run, a bare httptools protocol on uvloop
that answers the same body from the parser's callbacks: the floor under any server. Drives
each with ``bench.load``'s keep-alive clients, as ``bench.ingest`` drives the receiver, and
prints each server's CPU per request from ``/proc``. ``bench.ingest``'s "event loop" figure is
the first plus FastAPI's routing, the call's checks and the frames to the writer process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from typing import Any

from bench.load import drive
from bench.receivers import cpu_ticks, free_port, wait_healthy

ANSWER = (
    b'{"attempt":1,"decision":"go","operation_id":"x","reason":null,"receipt":null,'
    b'"state":"confirmed"}'
)  # both clients' checks pass: a "go" and a "confirmed"
_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(ANSWER)).encode())]


async def fixed(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Read the body whole, answer :data:`ANSWER`; the lifespan as uvicorn expects it."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].rpartition(".")[2]
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": ANSWER})


_RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
    + str(len(ANSWER)).encode()
    + b"\r\n\r\n"
    + ANSWER
)


class Callbacks(asyncio.Protocol):
    """The fixed answer written from the parser's callbacks, one write an answer."""

    def connection_made(self, transport: Any) -> None:
        import httptools

        self.transport = transport
        self.parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        self.transport.write(_RESPONSE)


def serve(port: int, bare: bool) -> None:
    from flowledger.receiver.engine.tuning import quiet_collector
    from flowledger.receiver.server import listen, serve_app

    sock = listen("127.0.0.1", port)
    if not bare:
        serve_app(fixed, sock, access_log=False)
        return
    import uvloop

    from flowledger.receiver.engine.tuning import SWITCH_INTERVAL

    async def run() -> None:
        loop = asyncio.get_running_loop()
        await loop.create_server(Callbacks, sock=sock)
        quiet_collector()
        await asyncio.Event().wait()

    sys.setswitchinterval(SWITCH_INTERVAL)
    uvloop.run(run())


def measure(bare: bool, requests: int, clients: int) -> tuple[float, float]:
    """Requests per second and the server's CPU per request, in µs."""
    port = free_port()
    # The server's log (its start, a reason it could not) goes to this terminal's stderr.
    command = [sys.executable, "-m", "bench.http_floor", "--serve", str(port)]
    server = subprocess.Popen([*command, *(["--bare"] if bare else [])], stdout=subprocess.DEVNULL)
    try:
        wait_healthy(port, server)  # both answer 200 to any path
        token = ("bench", None)
        asyncio.run(drive([port], token, 200, clients, "warm"))
        before = cpu_ticks(server.pid)
        done, elapsed, _ = asyncio.run(drive([port], token, requests // 2, clients, "run"))
        spent = (cpu_ticks(server.pid) - before) / os.sysconf("SC_CLK_TCK")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return done / elapsed, spent / done * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server's own process
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.bare)
        return
    asgi = measure(False, args.requests, args.clients)
    bare = measure(True, args.requests, args.clients)
    for name, (rate, cpu) in (("uvicorn, ASGI", asgi), ("parser callbacks", bare)):
        print(
            f"HTTP server answering a fixed body ({name}), {args.clients} clients: {rate:,.0f}"
            f" requests/s, server CPU {cpu:.1f} us per request"
        )
    print(f"parser callbacks / ASGI, CPU per request: {bare[1] / asgi[1]:.2f}")


if __name__ == "__main__":
    main()
