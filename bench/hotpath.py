"""The receiver's CPU per transition on SQLite without HTTP: what a change to the hot path
saves, measured even on a busy machine.

    python -m bench.hotpath [--pairs 2048] [--clients 64] [--rounds 5] [--signed]

The app ``flowledger serve`` runs (:func:`flowledger.receiver.create_app`, with its writer
process) is called straight through ASGI, in this process, by ``--clients`` coroutines sending
dispatch+confirm pairs as uvicorn would hand them over, the collector set as ``serve_app``
sets it. The clients go in step: every turn of the event loop is one whole batch of
``--clients`` calls, on every run, however busy the machine (the token cache is reloaded once
an hour, not every 2 s: a reload in a thread splits a turn). No HTTP parsing and no client
sockets: ``bench.ingest`` says what the whole costs, this what the lane, the writer process
and what passes between them cost, with less noise.

Prints, for each round, the CPU time per transition of this process (the receiver's half:
the lane, the pickles, the answers; and these clients, a few microseconds) and of the writer
process (``/proc``), and the medians of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop

from bench.load import Token, pair, signature
from bench.receivers import BENCH_SECRET
from bench.sampling import sampled
from flowledger.receiver.api.tokens import create_token
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger


def _child_cpu(pid: int) -> float:
    """CPU seconds of the writer process so far, to the nanosecond (its one thread's
    ``schedstat``), where ``/proc/PID/stat`` counts in ticks of 10 ms."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _scope(path: str, body: bytes, token: str, key: bytes | None) -> dict[str, Any]:
    headers = [
        (b"host", b"bench"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if key is not None:
        headers.append((b"x-flowledger-signature", signature(path, body, key).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "POST",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "state": {},
    }


async def _call(app: Any, path: str, body: bytes, token: str, key: bytes | None) -> bytes:
    sent: list[bytes] = []
    status: list[int] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        else:
            sent.append(message.get("body", b""))

    await app(_scope(path, body, token, key), receive, send)
    answer = b"".join(sent)
    if status != [200]:
        raise RuntimeError(f"{status}: {answer!r}")
    return answer


async def _client(app: Any, bearer: Token, ops: list[int], run: str) -> int:
    token, key = bearer
    for i in ops:
        op = f"/v1/operations/{run}-{i}"
        dispatch, confirm = pair(i)
        answer = await _call(app, f"{op}/dispatch", dispatch, token, key)
        assert b'"decision":"go"' in answer, answer
        confirmed = await _call(app, f"{op}/confirm", confirm, token, key)
        assert b'"state":"confirmed"' in confirmed, confirmed
    return 2 * len(ops)


async def _round(app: Any, child: int, token: Token, pairs: int, clients: int, run: str) -> Any:
    shares = [list(range(c, pairs, clients)) for c in range(clients)]
    child_before, started = _child_cpu(child), time.process_time()
    counts = await asyncio.gather(*(_client(app, token, s, run) for s in shares))
    return sum(counts), time.process_time() - started, _child_cpu(child) - child_before


async def _measure(db: str, args: argparse.Namespace) -> list[tuple[float, float]]:
    store, _ = init_ledger(db)
    ledger = Ledger(store)
    made = create_token(
        ledger, "bench", "write", signing=args.signed, server_secret=BENCH_SECRET.encode()
    )
    key = bytes.fromhex(made.signing_secret) if made.signing_secret else None
    token = (made.token, key)
    # Tokens reloaded once an hour, not every 2 s: a reload in a thread splits a turn.
    app: Any = create_app(ledger, secret=BENCH_SECRET.encode(), token_ttl=3600, writer_process=True)
    engine = app.state.receiver.engine
    await engine.start()
    try:
        child = engine.writer._proc.pid
        # The collector as ``serve_app`` leaves it before serving.
        gc.collect()
        gc.freeze()
        gc.set_threshold(50_000, 20, 100)
        await _round(app, child, token, 256, args.clients, "warm")
        found = []
        with sampled(os.getpid(), args.profile):
            for r in range(args.rounds):
                done, lane, wrote = await _round(
                    app, child, token, args.pairs, args.clients, f"r{r}"
                )
                found.append((lane / done * 1e6, wrote / done * 1e6))
                print(f"  round {r}: receiver {found[-1][0]:.1f} us, writer {found[-1][1]:.1f} us")
        return found
    finally:
        await engine.close()
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2048, help="dispatch+confirm pairs a round")
    parser.add_argument("--clients", type=int, default=64, help="calls a batch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--signed", action="store_true", help="every request signed (v2)")
    parser.add_argument(
        "--profile", type=Path, help="sample this process and the writer with py-spy (as ingest)"
    )
    parser.add_argument("--dir", default="./var", help="where the ledger is made")
    args = parser.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-hotpath-") as tmp:
        found = uvloop.run(_measure(str(Path(tmp) / "ledger.db"), args))  # as uvicorn serves
    lane = statistics.median(f[0] for f in found)
    wrote = statistics.median(f[1] for f in found)
    print(
        f"CPU per transition, median of {len(found)} rounds: {lane + wrote:.1f} us"
        f" (receiver {lane:.1f}, writer {wrote:.1f})"
    )


if __name__ == "__main__":
    main()
