"""The HTTP server's own CPU per request, answering a fixed body.

What the receiver's event loop would spend if the ledger cost nothing.

    python -m bench.http_floor [--requests 16000] [--clients 64]

Serves, with :func:`flowledger.receiver.engine.server.serve_app` (uvicorn with the receiver's
protocol, limits, collector and switch interval), an ASGI app that reads each body whole and
answers a fixed dispatch answer; drives it with ``bench.load``'s keep-alive clients, as
``bench.ingest`` drives the receiver, and prints the server's CPU per request from ``/proc``.
``bench.ingest``'s "event loop" figure is this plus the write lane and the frames to the
writer process.
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


def serve(port: int) -> None:
    from flowledger.receiver.engine.server import listen, serve_app

    serve_app(fixed, listen("127.0.0.1", port), access_log=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server's own process
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    port = free_port()
    # The server's log (its start, a reason it could not) goes to this terminal's stderr.
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.http_floor", "--serve", str(port)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_healthy(port, server)  # the fixed app answers 200 to any path
        token = ("bench", None)
        asyncio.run(drive([port], token, 200, args.clients, "warm"))
        before = cpu_ticks(server.pid)
        pairs = args.requests // 2
        done, elapsed, _ = asyncio.run(drive([port], token, pairs, args.clients, "run"))
        spent = (cpu_ticks(server.pid) - before) / os.sysconf("SC_CLK_TCK")
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(
        f"HTTP server answering a fixed body, {args.clients} clients: {done / elapsed:,.0f}"
        f" requests/s, server CPU {spent / done * 1e6:.1f} us per request"
    )


if __name__ == "__main__":
    main()
