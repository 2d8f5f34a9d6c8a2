"""What the Python client adds to a guarded write: ``Ledger.guard`` (dispatch, then confirm)
against bare httpx calls of the same two requests, on one real ``flowledger serve``.

    python -m bench.client_guard [--writes 2000] [--signing]

One receiver (SQLite, a fresh ledger in a temporary folder) and one caller in this process,
one write at a time, as a workflow's task makes them. Each write is a new operation (a ``go``
and a confirm). The two ways take turns write by write (bare first on even writes, the client
first on odd ones), on one keep-alive connection each, after a warm-up of 100 writes each:
the load on the machine moves both alike. Printed: p50 and p99 of each way's wall time per
write, the client's overhead (the differences), and the CPU this process spent per write
each way (``time.process_time``: unlike the wall times, it hardly moves with the load).
With ``--signing`` both ways sign every request (a ``--signing`` token).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.receivers import BENCH_SECRET, receivers
from flowledger.client import Ledger as Client
from flowledger.client import idempotency_key, signature
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger

VERSION = "bench@1"


def bare(http: httpx.Client, token: str, key: bytes | None) -> Callable[[str], None]:
    """The same two requests as the client sends, built by hand."""

    def post(path: str, body: dict[str, object], idem: str) -> dict[str, object]:
        content = json.dumps(body, separators=(",", ":")).encode()
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Idempotency-Key": idem,
        }
        if key is not None:
            headers["X-Flowledger-Signature"] = signature(
                key, int(time.time()), "POST", path, content
            )
        response = http.post(path, content=content, headers=headers)
        response.raise_for_status()
        return dict(response.json())

    def write(n: str) -> None:
        op = f"invoice:{n}:send"
        base = f"/v1/operations/invoice%3A{n}%3Asend"
        answer = post(
            f"{base}/dispatch",
            {
                "input": {"invoice": n, "amount": 1200},
                "processing_version": VERSION,
                "execution_id": n,
                "run_index": 0,
            },
            keyed("dispatch", op, n),
        )
        assert answer["decision"] == "go", answer
        post(
            f"{base}/confirm",
            {"receipt": f"msg-{n}", "execution_id": n},
            keyed("confirm", op, n),
        )

    return write


def keyed(call: str, operation_id: str, execution_id: str) -> str:
    return idempotency_key(
        call,
        workflow_id=None,
        execution_id=execution_id,
        step=None,
        run_index=0,
        operation_id=operation_id,
    )


def guarded(client: Client) -> Callable[[str], None]:
    def write(n: str) -> None:
        with client.guard(
            f"invoice:{n}:send",
            input={"invoice": n, "amount": 1200},
            version=VERSION,
            execution_id=n,
        ) as g:
            assert g.go
            g.confirm(f"msg-{n}")

    return write


def timed(write: Callable[[str], None], n: str, wall: list[float], cpu: list[float]) -> None:
    c0, t0 = time.process_time(), time.perf_counter()
    write(n)
    wall.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=2000, help="guarded writes each way")
    parser.add_argument("--signing", action="store_true", help="sign every request")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "ledger.db")
        store, _ = init_ledger(db)
        made = create_token(
            Ledger(store),
            "bench",
            "write",
            signing=args.signing,
            server_secret=BENCH_SECRET.encode(),
        )
        store.dispose()
        key = bytes.fromhex(made.signing_secret) if made.signing_secret else None
        with receivers(db, 1) as (port,):
            url = f"http://127.0.0.1:{port}"
            with (
                httpx.Client(base_url=url, timeout=10) as http,
                Client(url, token=made.token, signing_secret=made.signing_secret) as client,
            ):
                ways = {"bare httpx": bare(http, made.token, key), "client": guarded(client)}
                wall: dict[str, list[float]] = {name: [] for name in ways}
                cpu: dict[str, list[float]] = {name: [] for name in ways}
                for i in range(100):
                    for name, write in ways.items():
                        write(f"warm-{name[0]}-{i}")
                for i in range(args.writes):
                    order = list(ways) if i % 2 == 0 else list(reversed(ways))
                    for name in order:
                        timed(ways[name], f"{name[0]}-{i}", wall[name], cpu[name])
    print(
        f"{args.writes} guarded writes each way (dispatch + confirm), one at a time,"
        f" {'signed' if args.signing else 'unsigned'}, one flowledger serve on SQLite"
    )
    q = {name: statistics.quantiles(w, n=100) for name, w in wall.items()}
    for name in ways:
        print(
            f"  {name:<11} p50 {q[name][49] * 1e3:6.2f} ms  p99 {q[name][98] * 1e3:6.2f} ms"
            f"  this process's CPU {statistics.mean(cpu[name]) * 1e6:5.0f} us per write"
        )
    over50 = (q["client"][49] - q["bare httpx"][49]) * 1e3
    over99 = (q["client"][98] - q["bare httpx"][98]) * 1e3
    extra = (statistics.mean(cpu["client"]) - statistics.mean(cpu["bare httpx"])) * 1e6
    print(
        f"  client overhead: p50 {over50:+.2f} ms, p99 {over99:+.2f} ms,"
        f" CPU {extra:+.0f} us per write"
    )


if __name__ == "__main__":
    main()
