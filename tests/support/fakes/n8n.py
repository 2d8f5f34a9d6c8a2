"""A fake n8n public API for ``httpx.MockTransport`` that behaves as the real one does.

As in n8n-io/n8n (``public-api/v1/handlers/executions``): the list is id-descending, paged by
an opaque base64 cursor of ``{lastId, limit}``, ``limit`` over 250 is refused (400), active
executions are left out unless ``status=running`` is asked, by id any execution is returned
and a missing one is 404, 401 without the key, 403 without the scope. As observed on n8n
2.41: while starting it answers every path with ``200 text/html``. Tests can also drop a
waiting execution from the list (n8n issue 14748), prune the oldest, and queue faults.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

import httpx

from flowledger.connectors.base import Settings
from tests.support.builders import T0
from tests.support.fakes.tool import FakeTool

KEY = "n8n_api_test_key_0123456789"
STARTING_PAGE = "<!DOCTYPE html><html><body>n8n is starting up. Please wait</body></html>"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z") if when else None


class FakeN8n(FakeTool):
    kind = "n8n"
    list_path = "/api/v1/executions"
    base_url = "http://n8n.test"

    def __init__(self, *, api_key: str = KEY) -> None:
        super().__init__()
        self.api_key = api_key
        self.executions: dict[int, dict[str, Any]] = {}
        self.custom: dict[int, dict[str, str]] = {}
        self.workflows = {"wf-1": "send invoices", "wf-2": "sync crm"}
        self.scopes = {"execution:list", "execution:read", "workflow:list", "workflow:read"}
        # Each workflow's active version and its publish history, as n8n 2.41 answers a
        # workflow by id (docs/n8n.md); a new execution runs the version active then.
        self.active_versions: dict[str, str] = {}
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.ran: dict[int, str] = {}  # the version each execution ran, said by id only
        self.active: set[int] = set()  # in memory right now: left out of the plain list
        self.unlisted: set[int] = set()  # waiting, yet missing from the list
        self.starting = False
        self.readiness = 200  # ``/healthz/readiness``: 503 while n8n starts
        self.next_id = 1

    def settings(self, **kw: Any) -> Settings:
        return Settings(base_url=self.base_url, api_key=self.api_key, **kw)

    # ------------------------------------------------------------------ the tool's data

    def add(
        self,
        count: int = 1,
        *,
        status: str = "success",
        workflow_id: str = "wf-1",
        mode: str = "webhook",
        retry_of: str | None = None,
    ) -> list[str]:
        made = []
        for _ in range(count):
            i = self.next_id
            self.next_id += 1
            started = T0 + timedelta(seconds=i)
            self.executions[i] = {
                "id": str(i),
                "finished": status == "success",
                "mode": mode,
                "retryOf": retry_of,
                "retrySuccessId": None,
                "status": status,
                "startedAt": _iso(started),
                "stoppedAt": _iso(started + timedelta(seconds=2))
                if status not in ("new", "running", "waiting")
                else None,
                "workflowId": workflow_id,
                "waitTill": None,
            }
            if status in ("new", "running"):
                self.active.add(i)
            if workflow_id in self.active_versions:
                self.ran[i] = self.active_versions[workflow_id]
            if retry_of is not None and int(retry_of) in self.executions:
                self.executions[int(retry_of)]["retrySuccessId"] = str(i)
            made.append(str(i))
        return made

    def publish(self, workflow_id: str, version_id: str, at: datetime) -> None:
        """Make ``version_id`` the workflow's active version at ``at`` (a PUT on an active
        workflow, or its activation): what executions started from now on run."""
        self.active_versions[workflow_id] = version_id
        self.history.setdefault(workflow_id, []).append(
            {"versionId": version_id, "event": "activated", "createdAt": _iso(at)}
        )

    def set_status(self, execution_id: str, status: str) -> None:
        i = int(execution_id)
        item = self.executions[i]
        item["status"] = status
        item["finished"] = status == "success"
        if status in ("new", "running"):
            self.active.add(i)
        else:
            self.active.discard(i)
        if status not in ("new", "running", "waiting"):
            item["stoppedAt"] = _iso(T0 + timedelta(seconds=i + 60))

    def delete(self, execution_id: str) -> None:
        i = int(execution_id)
        del self.executions[i]
        self.active.discard(i)
        self.unlisted.discard(i)

    def prune(self, count: int) -> list[str]:
        """Drop the oldest ``count`` executions, as n8n's pruning does."""
        oldest = sorted(self.executions)[:count]
        for i in oldest:
            self.delete(str(i))
        return [str(i) for i in oldest]

    def ids(self) -> set[str]:
        return {str(i) for i in self.executions}

    def record(self, execution_id: str) -> dict[str, Any]:
        """The execution as the API answers a read by id."""
        return self.executions[int(execution_id)]

    # ------------------------------------------------------------------ HTTP

    def serve(self, request: httpx.Request) -> httpx.Response:
        if self.starting:
            return httpx.Response(200, text=STARTING_PAGE, headers={"content-type": "text/html"})
        path = request.url.path
        if path == "/healthz/readiness":
            return httpx.Response(self.readiness, json={"status": "ok"})
        if not path.startswith("/api/v1/"):
            return httpx.Response(404, text="Cannot GET " + path)
        key = request.headers.get("x-n8n-api-key")
        if not key:
            return httpx.Response(401, json={"message": "'X-N8N-API-KEY' header required"})
        if key != self.api_key:
            return httpx.Response(401, json={"message": "unauthorized"})
        if path == "/api/v1/executions":
            return self._need("execution:list") or self._list(request)
        if path.startswith("/api/v1/executions/"):
            return self._need("execution:read") or self._one(request, path.rsplit("/", 1)[1])
        if path == "/api/v1/workflows":
            return self._need("workflow:list") or self._workflows(request)
        if path.startswith("/api/v1/workflows/"):
            return self._need("workflow:read") or self._workflow(path.rsplit("/", 1)[1])
        return httpx.Response(404, json={"message": "not found"})

    def _need(self, scope: str) -> httpx.Response | None:
        return None if scope in self.scopes else httpx.Response(403, json={"message": "Forbidden"})

    def _list(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params
        try:
            limit = int(q.get("limit", "100"))
        except ValueError:
            return httpx.Response(400, json={"message": "request/query/limit must be integer"})
        last_id: int | None = None
        if q.get("cursor"):
            try:
                decoded = json.loads(base64.b64decode(q["cursor"]))
                last_id, limit = int(decoded["lastId"]), int(decoded["limit"])
            except (ValueError, KeyError, TypeError):
                return httpx.Response(400, json={"message": "An invalid cursor was provided"})
        if not 1 <= limit <= 250:
            return httpx.Response(400, json={"message": "request/query/limit must be <= 250"})
        status = q.get("status")
        wanted = {"error": {"error", "crashed"}}.get(status or "", {status} if status else None)
        rows = []
        for i in sorted(self.executions, reverse=True):
            if last_id is not None and i >= last_id:
                continue
            if status != "running" and i in self.active:
                continue
            if i in self.unlisted:
                continue
            if wanted is not None and self.executions[i]["status"] not in wanted:
                continue
            rows.append(i)
        page, rest = rows[:limit], rows[limit:]
        cursor = None
        if page and rest:
            raw = json.dumps({"lastId": str(page[-1]), "limit": limit}).encode()
            cursor = base64.b64encode(raw).decode()
        data = [self._item(i, q.get("includeData") == "true") for i in page]
        return httpx.Response(200, json={"data": data, "nextCursor": cursor})

    def _item(self, i: int, with_data: bool) -> dict[str, Any]:
        item = dict(self.executions[i])
        if with_data:
            item["data"] = {"resultData": {"runData": {}}}
            item["customData"] = self.custom.get(i, {})
        return item

    def _one(self, request: httpx.Request, raw_id: str) -> httpx.Response:
        if not raw_id.isdigit() or int(raw_id) not in self.executions:
            return httpx.Response(404, json={"message": "Not Found"})
        with_data = request.url.params.get("includeData") == "true"
        item = self._item(int(raw_id), with_data)
        item.update(createdAt=item["startedAt"], deletedAt=None, storedAt="db")
        if int(raw_id) in self.ran:
            item["workflowVersionId"] = self.ran[int(raw_id)]
        return httpx.Response(200, json=item)

    def _workflows(self, request: httpx.Request) -> httpx.Response:
        data = [
            {"id": wid, "name": name, "active": True, "isArchived": False}
            for wid, name in self.workflows.items()
        ]
        return httpx.Response(200, json={"data": data, "nextCursor": None})

    def _workflow(self, workflow_id: str) -> httpx.Response:
        """A workflow by id: its active version and the publish history of that version."""
        if workflow_id not in self.workflows:
            return httpx.Response(404, json={"message": "Not Found"})
        active = self.active_versions.get(workflow_id)
        history = [h for h in self.history.get(workflow_id, []) if h["versionId"] == active]
        body = {
            "id": workflow_id,
            "name": self.workflows[workflow_id],
            "active": active is not None,
            "versionId": active,
            "activeVersionId": active,
            "activeVersion": None
            if active is None
            else {"versionId": active, "workflowId": workflow_id, "nodes": [],
                  "workflowPublishHistory": history},
        }  # fmt: skip
        return httpx.Response(200, json=body)
