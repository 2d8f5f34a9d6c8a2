"""n8n's public API as far as ``flowledger n8n setup`` uses it, for ``httpx.MockTransport``
(:meth:`FakeN8n.client`) or, through :func:`serving`, on a real socket on 127.0.0.1 for a
``flowledger`` run in another process."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import httpx

KEY = "n8n_api_test_key"
SCOPES = {
    "credential:list",
    "credential:create",
    "workflow:list",
    "workflow:create",
    "workflow:read",
    "workflow:update",
    "workflow:activate",
    "executionTags:update",
    "execution:retry",
    "execution:delete",
}
NODE_TYPE = "n8n-nodes-flowledger.flowledger"


@dataclass
class FakeN8n:
    """n8n's public API as far as setup uses it, with the answers a real 2.41 gives."""

    installed: bool = True
    scopes: set[str] = field(default_factory=lambda: set(SCOPES))
    starting: bool = False
    credentials: list[dict[str, Any]] = field(default_factory=list)
    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        if self.starting:
            return httpx.Response(200, text="n8n is starting up. Please wait", headers=HTML)
        if request.headers.get("x-n8n-api-key") != KEY:
            return httpx.Response(401, json={"message": "unauthorized"})
        for (want_method, pattern, scope), answer in ROUTES.items():
            match = re.fullmatch(pattern, path)
            if method == want_method and match:
                if scope is not None and scope not in self.scopes:
                    return httpx.Response(403, json={"message": "Forbidden"})
                body = json.loads(request.content) if request.content else None
                return answer(self, request, body, *match.groups())
        return httpx.Response(404, json={"message": "not found"})

    def new_id(self) -> str:
        return f"id{len(self.credentials) + len(self.workflows) + 1:04d}"

    # -- routes

    def list_credentials(self, request: httpx.Request, body: Any) -> httpx.Response:
        items = [{k: c[k] for k in ("id", "name", "type")} for c in self.credentials]
        return httpx.Response(200, json={"data": items, "nextCursor": None})

    def credential_schema(self, request: httpx.Request, body: Any, name: str) -> httpx.Response:
        if name == "flowledgerApi" and self.installed:
            return httpx.Response(200, json={"type": "object", "properties": {}})
        return httpx.Response(404, json={"message": "Not Found"})

    def create_credential(self, request: httpx.Request, body: Any) -> httpx.Response:
        known = {"flowledgerApi"} if self.installed else set()
        if body["type"] not in known | {"httpHeaderAuth"}:
            return httpx.Response(400, json={"message": "unknown credential type"})
        made = {"id": self.new_id(), **body}
        self.credentials.append(made)
        return httpx.Response(200, json={"id": made["id"], "name": made["name"]})

    def list_workflows(self, request: httpx.Request, body: Any) -> httpx.Response:
        name = request.url.params.get("name")
        items = [
            {"id": w["id"], "name": w["name"], "active": w["active"], "isArchived": False}
            for w in self.workflows.values()
            if name is None or w["name"] == name
        ]
        return httpx.Response(200, json={"data": items, "nextCursor": None})

    def create_workflow(self, request: httpx.Request, body: Any) -> httpx.Response:
        extra = set(body) - {"name", "nodes", "connections", "settings"}
        if extra:
            return httpx.Response(400, json={"message": f"request/body must NOT have {extra}"})
        made = {"id": self.new_id(), "active": False, **body}
        self.workflows[made["id"]] = made
        return httpx.Response(200, json=made)

    def activate(self, request: httpx.Request, body: Any, wf: str) -> httpx.Response:
        self.workflows[wf]["active"] = True
        return httpx.Response(200, json=self.workflows[wf])

    def get_workflow(self, request: httpx.Request, body: Any, wf: str) -> httpx.Response:
        if wf not in self.workflows:
            return httpx.Response(404, json={"message": "Not Found"})
        return httpx.Response(200, json=self.workflows[wf])

    def put_workflow(self, request: httpx.Request, body: Any, wf: str) -> httpx.Response:
        self.workflows[wf].update(body)
        return httpx.Response(200, json=self.workflows[wf])

    def no_execution(self, request: httpx.Request, body: Any, execution_id: str) -> httpx.Response:
        return httpx.Response(404, json={"message": "Not Found"})

    def by_name(self, name: str) -> dict[str, Any]:
        return next(w for w in self.workflows.values() if w["name"] == name)


HTML = {"content-type": "text/html; charset=utf-8"}
ROUTES: dict[tuple[str, str, str | None], Any] = {
    ("GET", "/api/v1/credentials", "credential:list"): FakeN8n.list_credentials,
    ("GET", "/api/v1/credentials/schema/([^/]+)", None): FakeN8n.credential_schema,
    ("POST", "/api/v1/credentials", "credential:create"): FakeN8n.create_credential,
    ("GET", "/api/v1/workflows", "workflow:list"): FakeN8n.list_workflows,
    ("POST", "/api/v1/workflows", "workflow:create"): FakeN8n.create_workflow,
    ("POST", "/api/v1/workflows/([^/]+)/activate", "workflow:activate"): FakeN8n.activate,
    ("GET", "/api/v1/workflows/([^/]+)", "workflow:read"): FakeN8n.get_workflow,
    ("PUT", "/api/v1/workflows/([^/]+)", "workflow:update"): FakeN8n.put_workflow,
    # What the ledger does in n8n besides setup: the probes ask these of an id that is none.
    ("PUT", "/api/v1/executions/([^/]+)/tags", "executionTags:update"): FakeN8n.no_execution,
    ("POST", "/api/v1/executions/([^/]+)/retry", "execution:retry"): FakeN8n.no_execution,
    ("DELETE", "/api/v1/executions/([^/]+)", "execution:delete"): FakeN8n.no_execution,
}


class Handles(Protocol):
    def handle(self, request: httpx.Request) -> httpx.Response: ...


@contextmanager
def serving(fake: Handles) -> Iterator[str]:
    """``fake`` (any fake with a ``handle`` for ``httpx.MockTransport``) answering HTTP on
    127.0.0.1 (a free port) while in the block; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = httpx.Request(
                self.command,
                f"http://127.0.0.1{self.path}",
                headers=dict(self.headers.items()),
                content=self.rfile.read(length) if length else b"",
            )
            with lock:
                response = fake.handle(request)
            body = response.read()
            self.send_response(response.status_code)
            self.send_header("content-type", response.headers.get("content-type", "text/plain"))
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    lock = threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
