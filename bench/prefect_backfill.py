"""Backfill speed and memory of the sync against a real Prefect 3 server.

    python -m bench.prefect_backfill --api http://127.0.0.1:4200/api [--fill 10000]

``--fill N`` first creates flow runs until the server holds N (four writers; Prefect on SQLite
answers some creates 503 under concurrent writes, and those are tried again, counted). Then it
backfills a fresh SQLite ledger from the server through ``sync_source`` (200 runs a page, the
most Prefect allows) and prints the time, runs per second and this process's peak RSS. Run the
fill and the backfill as two commands for a peak RSS of the backfill alone. Start the server
with its own venv (``prefect server start``, SQLite); nothing of Prefect's is imported here.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger
from flowledger.sync import sync_source


def fill(api: str, count: int) -> None:
    with httpx.Client(base_url=api, timeout=60) as client:
        held = client.post("/flow_runs/count", json={}).json()
        flow_id = client.post("/flows/", json={"name": "bench-backfill"}).json()["id"]
    missing = max(0, count - held)
    retried = 0

    def create(i: int) -> int:
        tries = 0
        states = ("COMPLETED", "FAILED", "COMPLETED", "CRASHED")
        body = {"flow_id": flow_id, "state": {"type": states[i % 4]}, "tags": [f"n:{i}"]}
        with httpx.Client(base_url=api, timeout=60) as client:
            while client.post("/flow_runs/", json=body).status_code == 503:
                tries += 1
                time.sleep(0.05)
        return tries

    started = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        retried = sum(pool.map(create, range(missing)))
    took = time.perf_counter() - started
    print(
        f"filled {missing:,} flow runs in {took:.1f} s ({retried:,} creates answered 503, retried)"
    )


def backfill(api: str, count: int) -> None:
    cfg = SourceConfig(name="bench-prefect", kind="prefect", base_url=api, page_size=200)
    with tempfile.TemporaryDirectory() as tmp:
        store, _ = init_ledger(str(Path(tmp) / "bench.db"))
        started, cpu = time.perf_counter(), time.process_time()
        report = sync_source(Ledger(store), cfg)
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert report.ok, report
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        print(
            f"backfill of {report.new:,} Prefect flow runs: {took:.2f} s "
            f"({report.new / took:,.0f} /s, CPU {cpu:.2f} s), peak RSS {peak:.0f} MB"
        )
        if count and report.new < count:
            print(f"  (asked for at least {count:,}: the server held fewer)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", required=True, help="the server's PREFECT_API_URL")
    parser.add_argument(
        "--fill", type=int, default=0, help="create runs up to this many, then stop"
    )
    parser.add_argument("--count", type=int, default=0, help="runs the backfill must find")
    args = parser.parse_args()
    if args.fill:
        fill(args.api, args.fill)
        return
    backfill(args.api, args.count)


if __name__ == "__main__":
    main()
