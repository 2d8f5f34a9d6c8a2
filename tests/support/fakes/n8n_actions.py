"""n8n's execution actions as the ledger uses them (pin, retry, delete, list), kept in memory:
``handle`` for ``httpx.MockTransport``, or served on loopback for a child process
(:func:`tests.support.fakes.n8n_setup.serving`). ``answers`` overrides the next answers to a
route, in order, with a status and body, or an exception to raise (a timeout, a refused
connection)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

KEY = "n8n-test-key"


@dataclass
class FakeN8n:
    executions: dict[str, dict[str, Any]] = field(default_factory=dict)
    pinned: dict[str, list[str]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    answers: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    tags: set[str] = field(default_factory=set)
    scopes: set[str] = field(
        default_factory=lambda: {"executionTags:update", "execution:retry", "execution:delete"}
    )

    def add(self, execution_id: str, status: str = "error", **kw: Any) -> None:
        self.executions[execution_id] = {"id": execution_id, "status": status,
                                         "retryOf": None, "workflowId": "wf-1", **kw}  # fmt: skip

    def posts(self, path_end: str) -> int:
        return sum(1 for m, p in self.calls if m == "POST" and p.endswith(path_end))

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1")
        route = f"{request.method} {path}"
        self.calls.append((request.method, path))
        if request.headers.get("X-N8N-API-KEY") != KEY:
            return _json(401, {"message": "unauthorized"})
        queued = self.answers.get(route)
        if queued:
            answer = queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            if callable(answer):
                answer = answer()  # e.g. make the retry, then lose its answer
                if isinstance(answer, Exception):
                    raise answer
            status, body = answer
            if isinstance(body, str):
                return httpx.Response(status, text=body, headers={"content-type": "text/html"})
            return _json(status, body)
        parts = path.strip("/").split("/")
        if request.method == "GET" and parts == ["executions"]:
            running = request.url.params.get("status") == "running"
            items = [
                e for e in sorted(self.executions.values(), key=lambda e: -int(e["id"]))
                if (e["status"] == "running") == running
            ]  # fmt: skip
            return _json(200, {"data": items, "nextCursor": None})
        if len(parts) >= 2 and parts[0] == "executions":
            execution_id = parts[1]
            scope = {
                ("PUT", 3): "executionTags:update",
                ("POST", 3): "execution:retry",
                ("DELETE", 2): "execution:delete",
            }.get((request.method, len(parts)))
            if scope is not None and scope not in self.scopes:
                return _json(403, {"message": "Forbidden"})
            found = self.executions.get(execution_id)
            if found is None:
                return _json(404, {"message": "Not Found"})
            if request.method == "PUT":
                ids = [t["id"] for t in json.loads(request.content)]
                self.pinned[execution_id] = ids  # the annotation first, then the tags
                if any(i not in self.tags for i in ids):
                    return _json(404, {"message": "Some tags not found"})
                return _json(200, [{"id": i, "name": i} for i in ids])
            if request.method == "POST" and parts[2:] == ["retry"]:
                return _json(200, self.make_retry(execution_id))
            if request.method == "DELETE":
                del self.executions[execution_id]
                return _json(200, found)
        return _json(404, {"message": "no such route"})

    def make_retry(self, execution_id: str) -> dict[str, Any]:
        found = self.executions[execution_id]
        if found["status"] not in ("error", "crashed"):
            raise AssertionError("the ledger retried an execution n8n would refuse")
        new_id = str(max(int(i) for i in self.executions) + 1)
        self.add(new_id, "success", retryOf=execution_id, mode="retry")
        return self.executions[new_id]

    def retry_then_lose_the_answer(self, execution_id: str, exc: Exception) -> Any:
        """An answer for ``answers``: n8n makes the retry, the answer never arrives."""

        def act() -> Exception:
            self.make_retry(execution_id)
            return exc

        return act


def _json(status: int, body: Any) -> httpx.Response:
    return httpx.Response(status, json=body)
