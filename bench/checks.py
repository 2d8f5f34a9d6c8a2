"""What the hardening checks cost a plain (unsigned) workflow call, in CPU, in process.

    python -m bench.checks [--requests 20000] [--rounds 3]

``bench.ingest`` measures whole requests through ``flowledger serve``; on a machine shared
with other work its rates move by more than the few per cent the checks could take, so this
measures the checks themselves, each against the same work without it, by CPU time (what a
loaded machine moves least), the best of ``--rounds``:

- the request head's bounds (:func:`ledger.receiver.server.bounded_head_protocol`) against
  uvicorn's own httptools protocol, requests fed on one connection to a minimal app;
- the body guard (:class:`ledger.receiver.middleware.BodyGuard`) around that app against the
  app alone;
- the id checks a dispatch+confirm pair makes (control and bidi characters, the raw path's
  UTF-8) and the redaction of its texts (the receipt) with two configured secrets.

Prints each in microseconds per transition (a pair is two) and their sum, to set beside the
receiver's CPU per transition that ``bench.ingest`` prints.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from ledger.domain.display import has_unsafe
from ledger.domain.redact import redact, secrets_of
from ledger.receiver.middleware import BodyGuard
from ledger.receiver.server import bounded_head_protocol

SECRETS = secrets_of(["bench-server-secret", "n8nKey_Q7f3Z9xL2mP4vR8sT1uW"])
BODY = b'{"processing_version":"v1","execution_id":"e-1","run_index":0,"input":{"n":1}}'
HEAD = (
    b"POST /v1/operations/run-1/dispatch HTTP/1.1\r\nHost: bench\r\n"
    b"Authorization: Bearer flt_x\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n"
)
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the body and answers, as the write lane does at the least."""
    await receive()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"{}"})


class Transport(asyncio.Transport):
    """A connection that takes every write and never closes."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 1), "peername": ("127.0.0.1", 2)}.get(name, default)

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        pass


async def fed(protocol: type[Any], requests: int) -> float:
    """CPU microseconds per request fed to ``protocol`` on one kept-alive connection."""
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
    config.load()
    loop = asyncio.get_running_loop()
    conn = protocol(config=config, server_state=ServerState(), app_state={}, _loop=loop)
    conn.connection_made(Transport())
    started = time.process_time()
    for _ in range(requests):
        conn.data_received(HEAD + BODY)
        while conn.cycle is not None and not conn.cycle.response_complete:
            await asyncio.sleep(0)  # the request's task runs to its answer
    spent = time.process_time() - started
    conn.connection_lost(None)
    return spent / requests * 1e6


async def served(wrapped: Any, requests: int) -> float:
    """CPU microseconds per request through ``wrapped`` (an ASGI app)."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(message: Any) -> None:
        pass

    scope: dict[str, Any] = {"type": "http", "method": "POST", "headers": HEADERS}
    started = time.process_time()
    for _ in range(requests):
        await wrapped(scope, receive, send)
    return (time.process_time() - started) / requests * 1e6


def per_call(work: Callable[[int], object], calls: int) -> float:
    started = time.process_time()
    for i in range(calls):
        work(i)
    return (time.process_time() - started) / calls * 1e6


def pair_ids(i: int) -> None:
    """The id checks of one dispatch and one confirm."""
    for value in (f"run-{i}", f"e-{i}", "v1", f"run-{i}"):
        has_unsafe(value)
    for call in ("dispatch", "confirm"):
        raw = f"/v1/operations/run-{i}/{call}".encode()
        unquote_to_bytes(raw.partition(b"?")[0]).decode("utf-8")


def pair_texts(i: int) -> None:
    """The redaction of one pair's texts: the confirm's receipt (the dispatch sends none)."""
    redact(f"R-{i}", SECRETS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, rounds = args.requests, range(args.rounds)

    async def http() -> tuple[float, float]:
        bounded = bounded_head_protocol(10.0)
        plain = min([await fed(HttpToolsProtocol, n) for _ in rounds])
        head = min([await fed(bounded, n) for _ in rounds]) - plain
        guard = BodyGuard(app, limit=256 * 1024, timeout=10.0)
        bare = min([await served(app, n) for _ in rounds])
        body = min([await served(guard, n) for _ in rounds]) - bare
        return head, body

    head, body = asyncio.run(http())
    ids = min(per_call(pair_ids, n) for _ in rounds) / 2
    texts = min(per_call(pair_texts, n) for _ in rounds) / 2
    total = head + body + ids + texts
    print("CPU the checks add, microseconds per transition (one request each):")
    print(f"  head bounds     {head:6.2f}")
    print(f"  body guard      {body:6.2f}")
    print(f"  id checks       {ids:6.2f}")
    print(f"  redaction       {texts:6.2f}")
    print(
        f"  total           {total:6.2f}  (set beside bench.ingest's receiver CPU per transition)"
    )


if __name__ == "__main__":
    main()
