"""Apache Airflow 3.x (``/api/v2``): DAG runs as executions, named ``<dag_id>/<dag_run_id>``.

Facts this relies on (observed on Airflow 3.1): a JWT from ``POST /auth/token`` (``GET`` when
every user is admin); ``GET /api/v2/dags/~/dagRuns`` pages by ``limit``/``offset`` with
``limit`` capped by the server's ``maximum_page_limit`` (default 100), filters with
``updated_at_gte`` and sorts with ``order_by=id``, though items carry neither ``id`` nor
``updated_at``. So the position is a time: the ``Date`` of the server's first answer in a
run, less a margin, becomes the next run's ``updated_at_gte``; a run updated while we page is
read again next time (storing it twice changes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from connectors import fields
from connectors.base import (
    AuthFailed,
    ConnectorError,
    ExecutionRecord,
    Malformed,
    NoApi,
    Page,
    Settings,
)
from connectors.http import NotFound, public_url, request_json

STATUS = {"queued": "new", "running": "running", "success": "success", "failed": "error"}
MARGIN = timedelta(minutes=2)


class AirflowConnector:
    kind = "airflow"

    def __init__(self, client: httpx.Client, settings: Settings):
        self.client = client
        self.settings = settings
        self.base = settings.base_url.rstrip("/")
        self.limit = max(1, min(settings.page_size, 1000))
        self._token: str | None = None
        self.notes: list[str] = []
        # Without a user and password a token is asked for by GET, which Airflow grants only
        # when every user is an admin: a refusal then means credentials are needed.
        self._missing = (
            None if settings.username and settings.password else "username_env and password_env"
        )

    # ------------------------------------------------------------------ HTTP

    def _login(self) -> str:
        user, password = self.settings.username, self.settings.password
        if user and password:
            method, body = "POST", {"username": user, "password": password}
        else:
            method, body = "GET", None  # simple auth manager with every user an admin
        data, _ = request_json(
            self.client,
            method,
            self.base + "/auth/token",
            tool="Airflow",
            json_body=body,
            missing_credentials=self._missing,
        )
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token or len(token) > 8192:
            raise Malformed("Airflow's /auth/token answered without an access_token")
        return token

    def _list(self, params: dict[str, Any]) -> tuple[Any, httpx.Headers]:
        try:
            return self._get("/dags/~/dagRuns", params)
        except NotFound as exc:
            raise NoApi(
                f"no Airflow 3 API at {public_url(self.base)}/api/v2 (404): check base_url"
            ) from exc

    def _get(self, path: str, params: dict[str, Any] | None = None) -> tuple[Any, httpx.Headers]:
        for attempt in (1, 2):
            if self._token is None:
                self._token = self._login()
            try:
                return request_json(
                    self.client,
                    "GET",
                    self.base + "/api/v2" + path,
                    tool="Airflow",
                    headers={"Authorization": f"Bearer {self._token}"},
                    params=params,
                    missing_credentials=self._missing,
                )
            except AuthFailed:
                if attempt == 2:
                    raise
                self._token = None  # an expired token: log in once more
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ Protocol

    def pages(self, position: str | None) -> Iterator[Page]:
        pos = fields.position(position, "Airflow")
        since = pos.get("since")
        offset = int(pos.get("offset", 0))
        started = pos.get("started")
        while True:
            params: dict[str, Any] = {"limit": self.limit, "offset": offset, "order_by": "id"}
            if since:
                params["updated_at_gte"] = since
            body, headers = self._list(params)
            raw, total = _runs(body)
            if started is None:
                started = _server_time(headers).isoformat()
            records = [self._record(fields.obj(item, "a DAG run")) for item in raw]
            offset += len(raw)
            if not raw or offset >= total:
                yield Page(records, json.dumps({"since": started}), total)
                return
            yield Page(
                records,
                json.dumps({"since": since, "offset": offset, "started": started}),
                total,
            )

    def fetch(self, external_id: str) -> ExecutionRecord | None:
        dag_id, _, run_id = external_id.partition("/")
        try:
            body, _ = self._get(f"/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}")
        except NotFound:
            return None
        record = self._record(fields.obj(body, "the DAG run"))
        if record.external_id != external_id:
            raise Malformed(
                f"asked for DAG run {external_id}, Airflow answered {record.external_id}"
            )
        return record

    def present_ids(self) -> Iterator[list[str]]:
        offset = 0
        while True:
            params = {"limit": self.limit, "offset": offset, "order_by": "id"}
            body, _ = self._list(params)
            raw, total = _runs(body)
            yield [self._name(fields.obj(item, "a DAG run")) for item in raw]
            offset += len(raw)
            if not raw or offset >= total:
                return

    def check(self) -> str:
        where = public_url(self.base)
        body, _ = self._list({"limit": 1})
        try:
            _, total = _runs(body)
        except Malformed as exc:
            raise Malformed(f"{where} answered, but not like the Airflow 3 API: {exc}") from exc
        return f"Airflow API at {where} answers; {total} DAG run(s)"

    def pass_over(self, exc: ConnectorError) -> None:
        """Pages here are read from the list alone: no read names one record to go without."""
        raise exc

    # ------------------------------------------------------------------ records

    def _name(self, item: dict[str, Any]) -> str:
        dag_id = fields.ident(item, "dag_id", required=True)
        run_id = fields.ident(item, "dag_run_id", required=True)
        name = f"{dag_id}/{run_id}"
        if len(name) > 200:
            raise Malformed(f"DAG run name {name[:60]}… is longer than 200 characters")
        return name

    def _record(self, item: dict[str, Any]) -> ExecutionRecord:
        state = fields.text(item, "state", limit=32, required=True)
        assert state is not None
        status = STATUS.get(state, state)
        return ExecutionRecord(
            external_id=self._name(item),
            status=status,
            final=state in ("success", "failed"),
            workflow_id=fields.ident(item, "dag_id"),
            workflow_name=fields.ident(item, "dag_id"),
            mode=fields.text(item, "run_type", limit=32),
            started_at=fields.time(item, "start_date"),
            stopped_at=fields.time(item, "end_date"),
            extra={"state": state},
        )


def _runs(body: Any) -> tuple[list[Any], int]:
    raw = fields.items(body, "dag_runs", "the DAG run list")
    total = body.get("total_entries")
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise Malformed("the DAG run list has no total_entries count")
    return raw, total


def _server_time(headers: httpx.Headers) -> datetime:
    """When the server answered, by its own clock, less a margin for runs updated meanwhile."""
    try:
        when = parsedate_to_datetime(headers.get("date", ""))
    except (TypeError, ValueError) as exc:
        raise Malformed("Airflow answered without a valid Date header") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - MARGIN).astimezone(UTC)
