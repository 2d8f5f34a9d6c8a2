"""What the hardening checks cost a plain (unsigned) workflow call, in CPU, in process.

    python -m bench.checks [--requests 20000] [--rounds 3]
                           [--pairs 800] [--clients 16] [--ab-rounds 8]

``bench.ingest`` measures whole requests through ``flowledger serve``; on a machine shared
with other work its rates move by more than the few per cent the checks could take, so this
measures the checks themselves, each against the same work without it, by CPU time (what a
loaded machine moves least), the best of ``--rounds``:

- the request head's bounds (:func:`flowledger.receiver.engine.server.bounded_head_protocol`)
  against uvicorn's own httptools protocol, requests fed on one connection to a minimal app;
- the body guard (:class:`flowledger.receiver.engine.middleware.BodyGuard`) around that app
  against the app alone;
- the id checks a dispatch+confirm pair makes (control and bidi characters, the raw path's
  UTF-8) and the redaction of its texts (the receipt) with two configured secrets.

Prints each in microseconds per transition (a pair is two) and their sum, to set beside the
receiver's CPU per transition that ``bench.ingest`` prints.

Then whole calls, A against B in the same process: the receiver's app as ``serve`` builds it
(write lane, group commit, a SQLite ledger with ``synchronous=FULL``), fed ``--pairs``
dispatch+confirm pairs of requests from ``--clients`` kept-alive connections at once (so
that commits are shared, as under load), every answer checked to be 200. A runs it as it
is; B runs the same with every check above swapped for identity *in this process only*
(uvicorn's own httptools protocol, the body guard passing through, no control, bidi or
raw-path UTF-8 check on ids, redaction returning its text); A2 is A again, a control.
``--ab-rounds`` rounds (after one to warm up), each one run of A, B and A2, the order rotated
every round; prints the median CPU per transition (process CPU: the event loop and the
writer thread) and wall time of each, the median of the rounds' A/B ratios with the share of
A's CPU the checks take, and the median A/A2 ratio: how far apart two runs of the same code
are on this machine, which an A/B ratio within it cannot be told from.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock
from urllib.parse import unquote_to_bytes

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from flowledger.domain import limits
from flowledger.domain.display import has_unsafe
from flowledger.domain.redact import redact, secrets_of
from flowledger.receiver import create_app
from flowledger.receiver.api.tokens import create_token
from flowledger.receiver.engine import lane
from flowledger.receiver.engine.middleware import BodyGuard
from flowledger.receiver.engine.server import bounded_head_protocol
from flowledger.services import holds as hold_services
from flowledger.services.ledger import Ledger
from flowledger.storage import unit_of_work as unit
from flowledger.storage.migrate import init_ledger

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


class Answers(Transport):
    """One client's connection: counts the ``200`` answers written to it, and is told (by
    :func:`whole`) when the app has answered its request."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port, self.ok, self.answered = port, 0, asyncio.Event()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        found = {"sockname": ("127.0.0.1", 1), "peername": ("127.0.0.1", self.port)}
        return found.get(name, default)

    def write(self, data: Any) -> None:
        if bytes(data).startswith(b"HTTP/1.1 200 "):
            self.ok += 1


async def _unguarded(self: BodyGuard, scope: Any, receive: Any, send: Any) -> None:
    await self.app(scope, receive, send)


@contextlib.contextmanager
def checks_off() -> Iterator[None]:
    """B: each check swapped for identity, in this process and until the block ends (the
    head bounds are the protocol, chosen by the caller)."""
    with contextlib.ExitStack() as stack:
        for target, name, value in (
            (limits, "has_unsafe", lambda value: False),
            (lane, "check_raw_path", lambda scope: None),
            (unit, "redact", lambda text, secrets=None: text),
            (hold_services, "redact", lambda text, secrets=None: text),
            (BodyGuard, "__call__", _unguarded),
        ):
            stack.enter_context(mock.patch.object(target, name, value))
        yield


def pair_requests(token: str, run: str, pairs: int) -> list[bytes]:
    """A dispatch and a confirm of a new operation, ``pairs`` times, as a workflow sends them."""
    out = []
    for n in range(pairs):
        op = f"{run}-{n}"
        for call, body in (
            ("dispatch", b'{"processing_version":"v1","execution_id":"e-%d","run_index":0,'
             b'"input":{"n":%d},"workflow_id":"wf-1","step":"send"}' % (n, n)),
            ("confirm", b'{"receipt":"R-%d","execution_id":"e-%d"}' % (n, n)),
        ):  # fmt: skip
            out.append(
                f"POST /v1/operations/{op}/{call} HTTP/1.1\r\nHost: bench\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
    return out


async def whole(
    application: Any, protocol: type[Any], clients: list[list[bytes]]
) -> tuple[float, float]:
    """Process CPU and wall microseconds per request: each client's requests fed whole to
    ``protocol`` on its own kept-alive connection in front of ``application``, the next once
    the app has answered the last, all clients at once (so that commits are shared, as in a
    receiver under load)."""
    transports = {port: Answers(port) for port in range(10_000, 10_000 + len(clients))}

    async def app_then_note(scope: Any, receive: Any, send: Any) -> None:
        try:
            await application(scope, receive, send)
        finally:
            transports[scope["client"][1]].answered.set()

    config = uvicorn.Config(
        app_then_note, log_config=None, access_log=False, lifespan="off", server_header=False
    )
    config.load()
    loop = asyncio.get_running_loop()

    async def client(transport: Answers, requests: list[bytes]) -> None:
        conn = protocol(config=config, server_state=ServerState(), app_state={}, _loop=loop)
        conn.connection_made(transport)
        for request in requests:
            transport.answered.clear()
            conn.data_received(request)
            await transport.answered.wait()
        conn.connection_lost(None)

    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(t, r) for t, r in zip(transports.values(), clients, strict=True)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    sent = sum(map(len, clients))
    ok = sum(t.ok for t in transports.values())
    if ok != sent:
        raise RuntimeError(f"{sent - ok} of {sent} answers were not 200")
    return cpu / sent * 1e6, wall / sent * 1e6


SIDES = ("A", "B", "A2")  # with the checks, without, and with them again (the control)


def whole_calls_ab(pairs: int, clients: int, rounds: int) -> None:
    """Whole calls with the checks (A) and without (B), and A again (A2: what the same code
    differs by from run to run), the order rotated every round; see the module's text."""
    with tempfile.TemporaryDirectory(prefix="bench-checks-") as folder:
        store, _ = init_ledger(f"{folder}/ledger.db")
        ledger = Ledger(store, secrets=SECRETS)
        token = create_token(ledger, "bench", "write", signing=False, server_secret=None).token
        application = create_app(ledger)
        bounded = bounded_head_protocol(10.0)

        async def one(side: str, n: int) -> tuple[float, float]:
            requests = [
                pair_requests(token, f"r{n}{side}c{c}", pairs // clients) for c in range(clients)
            ]
            if side != "B":
                return await whole(application, bounded, requests)
            with checks_off():
                return await whole(application, HttpToolsProtocol, requests)

        async def run() -> list[dict[str, tuple[float, float]]]:
            results = []
            async with application.router.lifespan_context(application):
                for n in range(rounds + 1):  # the first round warms up, uncounted
                    order = SIDES[n % 3 :] + SIDES[: n % 3]
                    found = {side: await one(side, n) for side in order}
                    if n:
                        results.append(found)
            return results

        results = asyncio.run(run())
        store.dispose()

    def median(side: str, i: int) -> float:
        return statistics.median(r[side][i] for r in results)

    def ratio(top: str, bottom: str, i: int) -> float:
        return statistics.median(r[top][i] / r[bottom][i] for r in results)

    print(
        f"Whole calls through the receiver's app, {pairs // clients * clients} pairs a run from "
        f"{clients} clients, {rounds} rounds of A, B and A2 (medians):"
    )
    for side, label in zip(SIDES, ("checks on", "checks off", "checks on again"), strict=True):
        print(
            f"  {side:<3}{label:<17}CPU {median(side, 0):7.1f} us per transition,"
            f" wall {median(side, 1):7.1f} us"
        )
    cpu = ratio("A", "B", 0)
    print(
        f"  A/B                 CPU {cpu:.3f} (the checks take {1 - 1 / cpu:.1%} of A's CPU),"
        f" wall {ratio('A', 'B', 1):.3f}"
    )
    print(
        f"  A/A2                CPU {ratio('A', 'A2', 0):.3f}, wall {ratio('A', 'A2', 1):.3f}"
        "  (the same code twice: how far apart runs are)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=800, help="pairs a whole-call run")
    parser.add_argument("--clients", type=int, default=16, help="connections a whole-call run")
    parser.add_argument("--ab-rounds", type=int, default=8, help="whole-call A/B rounds")
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
    if args.ab_rounds:
        whole_calls_ab(args.pairs, args.clients, args.ab_rounds)


if __name__ == "__main__":
    main()
