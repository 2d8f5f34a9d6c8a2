"""A real loopback HTTP receiver for alert tests: records each delivery id it is sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class AlertReceiver:
    """``ThreadingHTTPServer`` on 127.0.0.1; ``deliveries`` lists (header id, body) pairs."""

    def __init__(self, port: int = 0, status: int = 200) -> None:
        self.status = status
        self.deliveries: list[tuple[str, dict[str, Any]]] = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                receiver.deliveries.append((self.headers.get("X-Flowledger-Delivery", ""), body))
                receiver.arrived.set()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def ids(self) -> list[str]:
        return [d for d, _ in self.deliveries]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
