"""A fake Airflow 3 API (``/auth/token``, ``/api/v2/dags/~/dagRuns``) for ``MockTransport``.

As observed on Airflow 3.1: a JWT from ``/auth/token`` (201), 401 without a token and 403 with
a bad one, DAG runs without ``id`` or ``updated_at`` fields although ``updated_at_gte``
filters and ``order_by=id`` sorts, ``limit`` capped by ``maximum_page_limit`` (100), and
``{dag_runs, total_entries}``. Every change bumps the fake's clock, sent as the ``Date``
header, and time passes with each request, so incremental reads by ``updated_at_gte`` behave
as on a real server.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import unquote

import httpx

from tests.support.builders import T0
from tests.support.fakes.tool import FakeTool

TOKEN = "jwt.header.payload"
STATE = {"success": "success", "error": "failed", "new": "queued", "running": "running"}


class FakeAirflow(FakeTool):
    kind = "airflow"
    list_path = "/api/v2/dags/~/dagRuns"
    base_url = "http://airflow.test"
    maximum_page_limit = 100

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[int, dict[str, Any]] = {}  # internal id -> run
        self.updated: dict[int, datetime] = {}
        self.now = T0
        self.next_id = 1
        self.token = TOKEN
        self.all_admins = True  # GET /auth/token grants a token without credentials
        self.api_key = TOKEN  # what must never be stored

    def _tick(self) -> datetime:
        self.now += timedelta(minutes=5)
        return self.now

    def _name(self, i: int) -> str:
        run = self.runs[i]
        return f"{run['dag_id']}/{run['dag_run_id']}"

    def add(self, count: int = 1, *, status: str = "success", **_: Any) -> list[str]:
        made = []
        for _n in range(count):
            i = self.next_id
            self.next_id += 1
            when = self._tick()
            self.runs[i] = {
                "dag_id": "nightly_export",
                "dag_run_id": f"manual__{(T0 + timedelta(seconds=i)).isoformat()}",
                "state": STATE[status],
                "run_type": "manual",
                "queued_at": when.isoformat(),
                "start_date": when.isoformat(),
                "end_date": when.isoformat() if status in ("success", "error") else None,
                "logical_date": None,
                "triggered_by": "rest_api",
                "conf": {},
                "note": None,
            }
            self.updated[i] = when
            made.append(self._name(i))
        return made

    def _find(self, name: str) -> int:
        for i in self.runs:
            if self._name(i) == name:
                return i
        raise KeyError(name)

    def set_status(self, name: str, status: str) -> None:
        i = self._find(name)
        self.runs[i]["state"] = STATE[status]
        self.updated[i] = self._tick()

    def delete(self, name: str) -> None:
        i = self._find(name)
        del self.runs[i], self.updated[i]

    def prune(self, count: int) -> list[str]:
        oldest = sorted(self.runs)[:count]
        names = [self._name(i) for i in oldest]
        for name in names:
            self.delete(name)
        return names

    def ids(self) -> set[str]:
        return {self._name(i) for i in self.runs}

    def record(self, name: str) -> dict[str, Any]:
        """The DAG run as the API answers a read by id."""
        return self.runs[self._find(name)]

    # ------------------------------------------------------------------ HTTP

    def serve(self, request: httpx.Request) -> httpx.Response:
        self.now += timedelta(minutes=3)  # time passes between requests, as it does
        date = {"date": format_datetime(self.now, usegmt=True)}
        path = request.url.path
        if path == "/auth/token":
            if request.method == "GET" and not self.all_admins:
                return httpx.Response(403, json={"detail": "Forbidden"})
            return httpx.Response(201, json={"access_token": self.token}, headers=date)
        auth = request.headers.get("authorization")
        if not auth:
            return httpx.Response(401, json={"detail": "Not authenticated"})
        if auth != f"Bearer {self.token}":
            return httpx.Response(403, json={"detail": "Invalid JWT token"})
        if path == "/api/v2/dags/~/dagRuns":
            return self._list(request, date)
        parts = request.url.raw_path.decode().split("/")
        if len(parts) == 7 and parts[3] == "dags" and parts[5] == "dagRuns":
            name = f"{unquote(parts[4])}/{unquote(parts[6])}"
            try:
                return httpx.Response(200, json=self.runs[self._find(name)], headers=date)
            except KeyError:
                return httpx.Response(404, json={"detail": "DagRun not found"})
        return httpx.Response(404, json={"detail": "Not Found"})

    def _list(self, request: httpx.Request, date: dict[str, str]) -> httpx.Response:
        q = request.url.params
        limit = min(int(q.get("limit", "50")), self.maximum_page_limit)
        offset = int(q.get("offset", "0"))
        rows = sorted(self.runs, reverse=q.get("order_by") == "-id")
        since = q.get("updated_at_gte")
        if since:
            floor = datetime.fromisoformat(since)
            rows = [i for i in rows if self.updated[i] >= floor]
        page = [self.runs[i] for i in rows[offset : offset + limit]]
        return httpx.Response(
            200, json={"dag_runs": page, "total_entries": len(rows)}, headers=date
        )
