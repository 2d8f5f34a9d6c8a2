"""Ingest benchmark: durable transitions per second through the webhook receiver.

``python -m bench.ingest [--pairs N] [--clients C]`` creates a fresh SQLite ledger, starts
``flowledger serve`` on a free loopback port, and drives dispatch+confirm pairs (two durable
transitions each) from C concurrent keep-alive clients. In the same run it measures a bare
``sqlite3`` loop that commits one row per transaction (WAL, ``synchronous=FULL``) in the same
directory: the rate one fsync per write allows on this disk. Prints transitions/s, request
latency p50/p99 and the ratio to the bare loop; a ratio above 1 means group commit beats one
fsync per row even with HTTP, validation, the state machine and the event chain on top.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from ledger.migrate import init_ledger
from ledger.receiver.tokens import create_token
from ledger.services import Ledger


def bare_sqlite_rate(directory: Path, rows: int) -> float:
    """Rows per second, one INSERT + COMMIT each, durable (WAL + synchronous=FULL)."""
    path = directory / f"bare-{time.monotonic_ns()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, state TEXT, data TEXT)")
    started = time.perf_counter()
    for i in range(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, 'dispatching', ?)", (f"op-{i}", "x" * 200))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return rows / elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes, token: str
) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    writer.write(head + body)
    status = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    payload = await reader.readexactly(length)
    if b" 200 " not in status:
        raise RuntimeError(f"{status!r} {payload!r}")
    return payload


async def _client(port: int, token: str, ops: list[int], latencies: list[float], run: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = 0
    try:
        for i in ops:
            op = f"/v1/operations/{run}-{i}"
            dispatch = (
                f'{{"processing_version":"v1","execution_id":"e-{i}","run_index":0,'
                f'"input":{{"n":{i},"what":"bench"}}}}'
            ).encode()
            t0 = time.perf_counter()
            answer = await _request(reader, writer, f"{op}/dispatch", dispatch, token)
            t1 = time.perf_counter()
            assert b'"decision":"go"' in answer, answer
            confirmed = await _request(
                reader, writer, f"{op}/confirm", f'{{"receipt":"R-{i}"}}'.encode(), token
            )
            t2 = time.perf_counter()
            assert b'"state":"confirmed"' in confirmed, confirmed
            latencies.extend((t1 - t0, t2 - t1))
            done += 2
    finally:
        writer.close()
    return done


async def drive(
    port: int, token: str, pairs: int, clients: int, run: str
) -> tuple[int, float, list[float]]:
    latencies: list[float] = []
    shares = [list(range(c, pairs, clients)) for c in range(clients)]
    started = time.perf_counter()
    counts = await asyncio.gather(*(_client(port, token, s, latencies, run) for s in shares))
    return sum(counts), time.perf_counter() - started, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="dispatch+confirm pairs")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--bare-rows", type=int, default=1500)
    parser.add_argument("--dir", default="./var", help="where the ledgers are made (same disk)")
    args = parser.parse_args()

    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-ingest-") as tmp:
        directory = Path(tmp)
        db = str(directory / "ledger.db")
        store, _ = init_ledger(db)
        token = create_token(Ledger(store), "bench", "write", signing=False, server_secret=None)
        store.dispose()
        bare_before = bare_sqlite_rate(directory, args.bare_rows)
        port = free_port()
        serve = [sys.executable, "-m", "ledger.cli", "serve", "--no-access-log"]
        command = [*serve, "--db", db, "--port", str(port)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            asyncio.run(drive(port, token.token, 200, args.clients, "warm"))
            done, elapsed, latencies = asyncio.run(
                drive(port, token.token, args.pairs, args.clients, "run")
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        # The disk is shared: measure the baseline before and after, and use the mean.
        bare = (bare_before + bare_sqlite_rate(directory, args.bare_rows)) / 2

    rate = done / elapsed
    q = statistics.quantiles(latencies, n=100)
    print(
        f"receiver: {done} durable transitions ({args.pairs} dispatch+confirm pairs) "
        f"from {args.clients} clients in {elapsed:.2f} s"
    )
    print(f"  throughput      {rate:,.0f} transitions/s")
    print(f"  latency p50     {q[49] * 1000:.1f} ms")
    print(f"  latency p99     {q[98] * 1000:.1f} ms")
    print(
        f"bare sqlite3, one commit per row (WAL, synchronous=FULL): {bare:,.0f} rows/s "
        f"(mean of before {bare_before:,.0f} and after): a durable commit costs "
        f"{1000 / bare:.2f} ms on this disk"
    )
    print(f"ratio receiver / bare loop: {rate / bare:.2f}")
    print(f"cpus: {os.cpu_count()}  (goal: >= 2,000/s, p99 <= 50 ms on 2 cores, ratio >= 1.0)")


if __name__ == "__main__":
    main()
