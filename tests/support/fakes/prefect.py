"""A fake Prefect 3 server API (``/api/flow_runs/filter``, ``/api/flows/filter``,
``/api/flow_runs/{id}``, ``/api/flow_runs/count``) for ``MockTransport``.

Its runs are copies of runs recorded from a Prefect 3.9.1 server
(``tests/fixtures/prefect/``), with new ids and times. As on that server: ``limit`` over
200 is a 422, paging by ``offset``; ``EXPECTED_START_TIME_ASC`` sorts on that one column,
``ID_DESC`` (the default) on random UUIDs; ``after_``/``before_`` are inclusive; 401 without
the Basic credentials when the server has an auth string. Time passes with each request and
is sent as the ``Date`` header.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from datetime import datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support.builders import T0
from tests.support.fakes.tool import FakeTool

FIXTURES = Path(__file__).parents[2] / "fixtures" / "prefect"
RECORDED = json.loads((FIXTURES / "flow_runs_filter.json").read_text())
FLOWS = json.loads((FIXTURES / "flows_filter.json").read_text())
STATE = {
    "success": ("COMPLETED", "Completed"),
    "error": ("FAILED", "Failed"),
    "running": ("RUNNING", "Running"),
    "new": ("PENDING", "Pending"),
    "crashed": ("CRASHED", "Crashed"),
}


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class FakePrefect(FakeTool):
    kind = "prefect"
    base_url = "http://prefect.test/api"
    list_path = "/api/flow_runs/filter"

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[str, dict[str, Any]] = {}  # in creation order
        self.now = T0
        self.auth: tuple[str, str] | None = None  # (user, password) when the server wants it
        self.api_key = "pf-secret-never-shown"

    def settings(self, **kw: Any) -> Any:
        if self.auth and "username" not in kw:
            kw = {"username": self.auth[0], "password": self.auth[1], **kw}
        return super().settings(**kw)

    def _tick(self) -> datetime:
        self.now += timedelta(minutes=5)
        return self.now

    def add(
        self, count: int = 1, *, status: str = "success", at: datetime | None = None, **_: Any
    ) -> list[str]:
        made = []
        for _n in range(count):
            run = copy.deepcopy(RECORDED[0])
            when = at or self._tick()
            run["id"] = str(uuid.uuid4())
            run["expected_start_time"] = run["start_time"] = run["created"] = _stamp(when)
            self.runs[run["id"]] = run
            self.set_status(run["id"], status)
            made.append(run["id"])
        return made

    def set_status(self, run_id: str, status: str) -> None:
        run = self.runs[run_id]
        run["state_type"], run["state_name"] = STATE[status]
        run["state"]["type"], run["state"]["name"] = STATE[status]
        final = status in ("success", "error", "crashed")
        run["end_time"] = run["expected_start_time"] if final else None

    def delete(self, run_id: str) -> None:
        del self.runs[run_id]

    def prune(self, count: int) -> list[str]:
        oldest = list(self.runs)[:count]
        for run_id in oldest:
            self.delete(run_id)
        return oldest

    def record(self, run_id: str) -> dict[str, Any]:
        """The flow run as the API answers a read by id."""
        return self.runs[run_id]

    def ids(self) -> set[str]:
        return set(self.runs)

    # ------------------------------------------------------------------ HTTP

    def serve(self, request: httpx.Request) -> httpx.Response:
        self.now += timedelta(minutes=3)
        date = {"date": format_datetime(self.now, usegmt=True)}
        path = request.url.path
        if path == "/api/health":
            return httpx.Response(200, json=True, headers=date)
        if self.auth:
            pair = base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
            if request.headers.get("authorization") != f"Basic {pair}":
                return httpx.Response(401, json={"exception_message": "Unauthorized"})
        body = json.loads(request.content or b"{}")
        if path == "/api/flow_runs/filter" and request.method == "POST":
            return self._filter(body, date)
        if path == "/api/flow_runs/count" and request.method == "POST":
            return httpx.Response(200, json=len(self.runs), headers=date)
        if path == "/api/flows/filter" and request.method == "POST":
            wanted = set(body.get("flows", {}).get("id", {}).get("any_", []))
            return httpx.Response(200, json=[f for f in FLOWS if f["id"] in wanted], headers=date)
        if path.startswith("/api/flow_runs/") and request.method == "GET":
            run = self.runs.get(path.rsplit("/", 1)[1])
            if run is None:
                return httpx.Response(404, json={"detail": "Flow run not found"})
            return httpx.Response(200, json=run, headers=date)
        return httpx.Response(404, json={"detail": "Not Found"})

    def _filter(self, body: dict[str, Any], date: dict[str, str]) -> httpx.Response:
        limit = body.get("limit", 200)
        if limit > 200:
            return httpx.Response(
                422, json={"detail": "Invalid limit: must be less than or equal to 200."}
            )
        rows = list(self.runs.values())
        window = body.get("flow_runs", {}).get("expected_start_time", {})
        if "after_" in window:
            floor = datetime.fromisoformat(window["after_"].replace("Z", "+00:00"))
            rows = [r for r in rows if _time(r) >= floor]
        if "before_" in window:
            ceiling = datetime.fromisoformat(window["before_"].replace("Z", "+00:00"))
            rows = [r for r in rows if _time(r) <= ceiling]
        sort = body.get("sort", "ID_DESC")
        if sort == "EXPECTED_START_TIME_ASC":
            rows.sort(key=_time)  # stable: ties in creation order, no tiebreaker asked
        elif sort == "ID_DESC":
            rows.sort(key=lambda r: r["id"], reverse=True)
        else:
            return httpx.Response(422, json={"detail": f"sort {sort} not faked"})
        offset = body.get("offset", 0)
        return httpx.Response(200, json=rows[offset : offset + limit], headers=date)


def _time(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["expected_start_time"].replace("Z", "+00:00"))
