"""Backfill speed and memory of the sync against a loopback server that speaks the n8n API.

    python -m bench.sync [--scale 10] [--count N] [--db URL]

A child process serves ``--count`` executions, 250 a page, id-descending with an opaque cursor,
as n8n does. This process first walks every page through the connector alone (the baseline:
HTTP and parsing, nothing stored), then backfills a fresh ledger, and reports executions per
second, the ratio to the baseline, and peak RSS. Last it times an incremental poll with nothing
new, which must cost exactly one request, and reads two pages of the executions list (the
first, and one from the middle, keyset paged as ``flowledger executions`` pages), printing
their query plans, and verifies the event chain (a backfill links no operation here, so it adds
no event: the chain must still hold). ``--scale 10`` serves 1,000,000 executions. Goals:
backfill <= 20 s per 100,000 executions, peak RSS <= 200 MB.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import sqlalchemy as sa

from bench.sweep import Recorder, explain, verify
from flowledger.config import SourceConfig
from flowledger.connectors.n8n import N8nConnector
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads.execution_copies import EXECUTIONS, list_executions
from flowledger.sync import sync_source
from flowledger.sync.connect import connector_settings

KEY = "bench-key"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _item(i: int) -> dict[str, Any]:
    started = T0 + timedelta(seconds=i)
    return {
        "id": str(i),
        "finished": True,
        "mode": "webhook",
        "retryOf": None,
        "retrySuccessId": None,
        "status": "success" if i % 17 else "error",
        "startedAt": started.isoformat().replace("+00:00", "Z"),
        "stoppedAt": (started + timedelta(seconds=3)).isoformat().replace("+00:00", "Z"),
        "workflowId": f"wf-{i % 7}",
        "waitTill": None,
    }


def serve(count: int) -> None:
    """The child: an n8n-shaped API over ids 1..count, made on the fly (nothing held)."""
    hits = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body in one segment: no delayed-ACK stall

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json; charset=utf-8")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/__hits":
                self._send(200, {"hits": hits["n"]})
                return
            hits["n"] += 1
            if self.headers.get("x-n8n-api-key") != KEY:
                self._send(401, {"message": "unauthorized"})
            elif url.path == "/api/v1/workflows":
                data = [{"id": f"wf-{w}", "name": f"workflow {w}"} for w in range(7)]
                self._send(200, {"data": data, "nextCursor": None})
            elif url.path == "/api/v1/executions":
                limit, top = int(q.get("limit", 100)), count
                if "cursor" in q:
                    cur = json.loads(base64.b64decode(q["cursor"]))
                    limit, top = int(cur["limit"]), int(cur["lastId"]) - 1
                ids = range(top, max(0, top - min(limit, 250)), -1)
                nxt = None
                if ids and ids[-1] > 1:
                    nxt = base64.b64encode(
                        json.dumps({"lastId": str(ids[-1]), "limit": limit}).encode()
                    ).decode()
                self._send(200, {"data": [_item(i) for i in ids], "nextCursor": nxt})
            else:
                self._send(404, {"message": "not found"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def listing(store: Store, count: int) -> None:
    """The first page of the executions list and one from the middle, timed, with plans."""
    recorder = Recorder(store.reader)
    t = time.perf_counter()
    first = list_executions(store, limit=100)
    first_ms = (time.perf_counter() - t) * 1000
    with store.reader.connect() as conn:
        middle = conn.execute(
            sa.select(EXECUTIONS.c.id).where(EXECUTIONS.c.external_id == str(count // 2))
        ).scalar_one()
    t = time.perf_counter()
    deep = list_executions(store, after=middle, limit=100)
    deep_ms = (time.perf_counter() - t) * 1000
    sa.event.remove(store.reader, "before_cursor_execute", recorder.seen)
    assert len(first) == len(deep) == 100 and deep[0]["external_id"] == str(count // 2 - 1)
    print(
        f"executions list, 100 a page: first page {first_ms:.1f} ms, "
        f"a page from the middle {deep_ms:.1f} ms; their plans:"
    )
    explain(store, recorder.statements)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", type=int, default=1, help="10: 1,000,000 executions instead of 100,000"
    )
    parser.add_argument("--count", type=int, help="executions (default 100,000 x scale)")
    parser.add_argument("--db", help="ledger URL (default: a fresh SQLite file)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    count = args.count or 100_000 * args.scale
    goal = 20 * count / 100_000
    if args.serve:
        serve(count)
        return

    child = subprocess.Popen(
        [sys.executable, "-m", "bench.sync", "--serve", "--count", str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        os.environ["BENCH_N8N_KEY"] = KEY
        cfg = SourceConfig(name="bench", kind="n8n", base_url=base, api_key_env="BENCH_N8N_KEY")
        print(f"flowledger sync bench: {count:,} executions, 250 a page, {base}", flush=True)
        rss0 = peak_rss_mb()

        with httpx.Client() as client:
            t, cpu = time.perf_counter(), time.process_time()
            walked = 0
            for page in N8nConnector(client, connector_settings(cfg)).pages(None):
                walked += len(page.records)
            baseline = time.perf_counter() - t
            baseline_cpu = time.process_time() - cpu
        print(
            f"baseline (HTTP + parse, nothing stored): {baseline:6.2f} s  "
            f"{walked / baseline:9,.0f} /s   CPU {baseline_cpu * 1e6 / walked:5.1f} us each"
        )

        with tempfile.TemporaryDirectory() as tmp:
            store, _ = init_ledger(args.db or str(Path(tmp) / "bench.db"))
            ledger = Ledger(store)
            t, cpu = time.perf_counter(), time.process_time()
            report = sync_source(ledger, cfg)
            took = time.perf_counter() - t
            took_cpu = time.process_time() - cpu
            assert report.ok and report.new == count, report
            rate = report.new / took
            print(
                f"backfill (stored, one transaction a page): {took:6.2f} s  {rate:9,.0f} /s  "
                f"= {took / baseline:.2f} x baseline   goal <= {goal:g} s: "
                f"{'met' if took <= goal else 'MISSED'}"
            )
            print(
                f"  its CPU (this process, both threads): {took_cpu * 1e6 / report.new:5.1f} us "
                f"each = {took_cpu / baseline_cpu:.2f} x the baseline's CPU"
            )
            peak = peak_rss_mb()
            print(
                f"peak RSS: {peak:.0f} MB (at start {rss0:.0f} MB)   goal <= 200 MB: "
                f"{'met' if peak <= 200 else 'MISSED'}"
            )

            hits = httpx.get(f"{base}/__hits").json()["hits"]
            t = time.perf_counter()
            poll = sync_source(ledger, cfg)
            poll_took = time.perf_counter() - t
            requests = httpx.get(f"{base}/__hits").json()["hits"] - hits
            print(
                f"incremental poll, nothing new: {poll_took * 1000:6.1f} ms, "
                f"{requests} request(s), {poll.new} new   must be 1 request: "
                f"{'met' if requests == 1 else 'MISSED'}"
            )
            listing(store, count)
            try:
                verify(store, "the backfill")
            finally:
                store.dispose()
    finally:
        child.terminate()
        child.wait()


if __name__ == "__main__":
    main()
