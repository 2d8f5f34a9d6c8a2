"""``flowledger serve`` processes for a benchmark, and what they cost: CPU time from ``/proc``
and round trips to the database from their metrics."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

BENCH_SECRET = "bench-server-secret"  # FLOWLEDGER_SECRET of the signed run's receivers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def receivers(db: str, count: int, pids: list[int] | None = None) -> Iterator[list[int]]:
    """``count`` ``flowledger serve`` processes on one ledger, each on a free loopback port
    (their process ids appended to ``pids`` when given)."""
    ports = [free_port() for _ in range(count)]
    serve = [sys.executable, "-m", "flowledger.cli", "serve", "--no-access-log", "--db", db]
    env = {**os.environ, "FLOWLEDGER_SECRET": BENCH_SECRET}
    procs = [
        subprocess.Popen(
            [*serve, "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port, proc in zip(ports, procs, strict=True):
            wait_healthy(port, proc)
        if pids is not None:
            pids.extend(p.pid for p in procs)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def wait_healthy(port: int, proc: subprocess.Popen[Any]) -> None:
    """Until the server ``proc`` started answers 200 on ``port``; a server that ended first is
    said at once, with its exit status."""
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server ended at start (exit status {proc.returncode})")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """CPU time the processes have used (Linux ``/proc``): unlike the rates, it hardly moves
    with the load others put on the machine. The processes' own, and their children's (the
    writer process of each receiver)."""
    ticks = os.sysconf("SC_CLK_TCK")
    own = children = 0
    for pid in pids:
        own += cpu_ticks(pid)
        children += sum(cpu_ticks(child) for child in descendants(pid))
    return own / ticks, children / ticks


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        for child in children:
            found += [int(child), *descendants(int(child))]
    return found


_SUMMED = (
    "flowledger_db_round_trips_total",
    "flowledger_commit_batch_units_sum",
    "flowledger_commit_batch_units_count",
)


def counters(ports: list[int]) -> dict[str, float]:
    """The receivers' round trips to the database (PostgreSQL) and the units their group
    commits took and how many commits there were (``flowledger_commit_batch_units``), each
    summed over the receivers."""
    total = dict.fromkeys(_SUMMED, 0.0)
    for port in ports:
        for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
            name, _, value = line.partition(" ")
            if name in total:
                total[name] += float(value)
    return total
