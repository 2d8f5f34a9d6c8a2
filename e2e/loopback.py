"""HTTP servers on loopback threads: the write target a workflow writes to, and the base for
stand-ins."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet HTTP/1.1 handler that reads and answers JSON."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("content-length", 0)))

    def send_json(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class Loopback:
    """``handler`` served on a free loopback port in a thread; ``url`` ends with ``path``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Target(Loopback):
    """The system a workflow writes to: ``POST /invoices`` records the write, then answers
    ``{"id": "T-<n>"}``. An ``invoice_id`` starting with ``reject`` gets 422, ``busy`` 503 (the
    write may or may not have happened: the target is not counted as having written it),
    ``noid`` a 200 without ``id``, ``slow`` is recorded and then answered only after
    ``slow_seconds``; the first request for a ``hang`` invoice waits for ``let_go`` and is
    never carried out (n8n killed meanwhile: the write did not happen).
    ``requests`` counts every request by invoice, ``writes`` those the target carried out."""

    def __init__(self, slow_seconds: float = 120.0) -> None:
        self.writes: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.slow_seconds = slow_seconds
        self.let_go = threading.Event()
        target = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.read_body() or b"{}")
                invoice = str(body.get("invoice_id", "?"))
                with target.lock:
                    target.requests[invoice] += 1
                    first = target.requests[invoice] == 1
                if invoice.startswith("hang") and first:
                    target.let_go.wait(300)
                    with contextlib.suppress(OSError):  # the caller is gone by now
                        self.send_json(503, {"error": "never written"})
                    return None
                if invoice.startswith("reject"):
                    return self.send_json(422, {"error": "no such customer"})
                if invoice.startswith("busy"):
                    return self.send_json(503, {"error": "try later"})
                with target.lock:
                    target.writes[invoice] += 1
                    n = sum(target.writes.values())
                if invoice.startswith("slow"):
                    time.sleep(target.slow_seconds)
                if invoice.startswith("noid"):
                    return self.send_json(200, {"status": "accepted"})
                return self.send_json(200, {"id": f"T-{n}", "invoice_id": invoice})

        super().__init__(Handler, "/invoices")
