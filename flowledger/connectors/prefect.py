"""Prefect 3 (a self-hosted server or Prefect Cloud): flow runs as executions, by run id.

``base_url`` is what Prefect itself calls ``PREFECT_API_URL``: ``http://host:4200/api`` for a
server, ``https://api.prefect.cloud/api/accounts/<a>/workspaces/<w>`` for Cloud. A server run
with ``PREFECT_SERVER_API_AUTH_STRING`` takes Basic auth (``username_env``/``password_env``),
Cloud a Bearer key (``api_key_env``).

Facts this relies on (observed on Prefect 3.9.1): ``POST /flow_runs/filter`` pages by
``limit`` (at most 200) and ``offset`` only; its sorts are each on one column with no
tiebreaker, the default one by random UUIDs; nothing filters or sorts on ``updated``; time
filters are inclusive; runs carry ``flow_id``, not the flow's name.

How a walk stays exact while runs are added and deleted: offsets move under a walk (a run
deleted between two pages shifts every later row one place back), so the walk does not page
by offset. It pages by *value* on ``expected_start_time``, which every run has and which does
not change once the run is under way: each request asks for runs at or after the last time
read (``after_`` is inclusive), sorted by that time, from offset 0, and leaves out the ids it
already holds at that time. A deletion moves no value, so nothing is skipped; what the
inclusive bound reads twice is left out by id, so nothing is doubled. A run added while a
walk pages is created with an expected start time of about its creation, after the walk's
start, and is read by the next run, which starts a margin before the time the server gave
(``Date``) on the first answer of this one. Runs whose time is past the server's ``Date``
(scheduled in the future) end a walk: a time cursor parked on them would never move on, and
they are read once their time has come. Only when more runs than a page holds share one
time to the microsecond does the walk page by offset among them, each page overlapping the
last by :data:`ANCHOR` runs and required to hold one already read (else it starts that time
again; repeats are left out by id).

Status changes move no time either: the sync refreshes a run by id until it is final, so
the list is only read for runs not seen yet. A flow run's retries keep its id and raise
``run_count``: a retried run is one execution, with ``run_count`` kept in ``extra``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx

from flowledger.connectors import fields
from flowledger.connectors.base import (
    ConnectorError,
    ExecutionRecord,
    Kind,
    Malformed,
    NoApi,
    Page,
    Settings,
)
from flowledger.connectors.http import NotFound, public_url, request_json, server_time

# Prefect's state types onto the ledger's statuses; the type and name are kept in ``extra``.
STATUS = {
    "SCHEDULED": "new",
    "PENDING": "new",
    "RUNNING": "running",
    "CANCELLING": "running",
    "PAUSED": "waiting",
    "COMPLETED": "success",
    "FAILED": "error",
    "CRASHED": "crashed",
    "CANCELLED": "canceled",
}
FINAL = frozenset({"COMPLETED", "FAILED", "CRASHED", "CANCELLED"})
MAX_LIMIT = 200  # a larger limit is a 422
MARGIN = timedelta(minutes=2)
ANCHOR = 5  # runs a page among one time overlaps the last with (at most a quarter)
MAX_RESTARTS = 16
MAX_TIED_IDS = 20  # ids at the cursor kept in a stored position (more are read again)
EPOCH = "1970-01-01T00:00:00Z"
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
PARAMETER = "operation_id"  # a flow parameter that names the operation the run writes
CREDENTIALS = (
    "api_key_env (Prefect Cloud) or username_env and password_env (a server's auth string)"
)


class ListMoved(ConnectorError):
    """Runs sharing one start time changed faster than a walk could read them."""

    retryable = True


class PrefectConnector:
    kind = "prefect"

    def __init__(self, client: httpx.Client, settings: Settings):
        self.client = client
        self.settings = settings
        self.base = settings.base_url.rstrip("/")
        self.limit = max(2, min(settings.page_size, MAX_LIMIT))
        self.notes: list[str] = []
        self._flows: dict[str, str] = {}  # flow id -> name
        self._tag = settings.custom_data_key + ":"
        if settings.api_key:
            self._headers = {"Authorization": f"Bearer {settings.api_key}"}
        elif settings.username and settings.password:
            pair = f"{settings.username}:{settings.password}".encode()
            self._headers = {"Authorization": "Basic " + base64.b64encode(pair).decode()}
        else:
            self._headers = {}
        self._missing = None if self._headers else CREDENTIALS

    # ------------------------------------------------------------------ HTTP

    def _call(self, method: str, path: str, body: Any = None) -> tuple[Any, httpx.Headers]:
        return request_json(
            self.client,
            method,
            self.base + path,
            tool="Prefect",
            headers=self._headers,
            json_body=body,
            missing_credentials=self._missing,
        )

    def _list(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], httpx.Headers]:
        try:
            data, headers = self._call("POST", "/flow_runs/filter", body)
        except NotFound as exc:
            raise NoApi(
                f"no Prefect API at {public_url(self.base)} (404): check base_url "
                "(Prefect's PREFECT_API_URL, e.g. http://host:4200/api)"
            ) from exc
        if not isinstance(data, list):
            raise Malformed(
                f"{public_url(self.base)} answered, but not like the Prefect API "
                "(the flow run list is not a list)"
            )
        return [fields.obj(item, "a flow run") for item in data], headers

    # ------------------------------------------------------------------ Protocol

    def pages(self, position: str | None) -> Iterator[Page]:
        pos = fields.position(position, "Prefect")
        at = str(pos.get("at") or pos.get("since") or EPOCH)
        tied = pos.get("ids")
        started = pos.get("started")
        walk = _Walk(self, at, [str(i) for i in tied] if isinstance(tied, list) else [])
        for items, headers, done in walk.run(stop_at_now=True):
            if started is None:
                started = (server_time(headers, "Prefect") - MARGIN).isoformat()
            records = [self._record(item) for item in items]
            self._name_flows(records)
            records = [self._named(r) for r in records]
            if done:
                yield Page(records, json.dumps({"since": started}))
                return
            at_now = {"at": walk.at, "ids": walk.tied[-MAX_TIED_IDS:], "started": started}
            yield Page(records, json.dumps(at_now))

    def fetch(self, external_id: str) -> ExecutionRecord | None:
        if not UUID.match(external_id):
            raise Malformed(f"{external_id[:60]!r} is not a Prefect flow run id")
        try:
            body, _ = self._call("GET", f"/flow_runs/{external_id}")
        except NotFound:
            return None
        record = self._record(fields.obj(body, "the flow run"))
        if record.external_id != external_id:
            raise Malformed(
                f"asked for flow run {external_id}, Prefect answered {record.external_id}"
            )
        self._name_flows([record])
        return self._named(record)

    def present_ids(self) -> Iterator[list[str]]:
        for items, _, _ in _Walk(self, EPOCH, []).run(stop_at_now=False):
            yield [str(item["id"]) for item in items]

    def check(self) -> str:
        where = public_url(self.base)
        try:
            count, _ = self._call("POST", "/flow_runs/count", {})
        except NotFound as exc:
            raise NoApi(
                f"{where} answered 404 where Prefect counts flow runs: not the Prefect API "
                "there; check base_url (Prefect's PREFECT_API_URL, e.g. http://host:4200/api)"
            ) from exc
        if not isinstance(count, int) or isinstance(count, bool):
            raise Malformed(f"{where} answered, but not like the Prefect API (no flow run count)")
        return f"Prefect API at {where} answers; {count} flow run(s)"

    def pass_over(self, exc: ConnectorError) -> None:
        """Pages here are read from the list alone: no read names one record to go without."""
        raise exc

    # ------------------------------------------------------------------ records

    def _record(self, item: dict[str, Any]) -> ExecutionRecord:
        run_id = fields.ident(item, "id", required=True)
        assert run_id is not None
        if not UUID.match(run_id):
            raise Malformed(f"flow run id {run_id[:60]!r} is not a UUID")
        kind = fields.text(item, "state_type", limit=32)
        name = fields.text(item, "state_name", limit=64)
        status = STATUS.get(kind or "", "unknown")
        if kind == "SCHEDULED" and name == "AwaitingRetry":
            status = "waiting"  # a failed try, the next one scheduled
        runs = item.get("run_count")
        if not isinstance(runs, int) or isinstance(runs, bool) or runs < 0:
            raise Malformed("a flow run has no run_count")
        extra = {"state_type": kind or "", "state_name": name or "", "run_count": str(runs)}
        run_name = fields.text(item, "name", limit=200)
        if run_name:
            extra["name"] = run_name
        return ExecutionRecord(
            external_id=run_id,
            status=status,
            final=kind in FINAL,
            workflow_id=fields.ident(item, "flow_id"),
            mode="deployment" if item.get("deployment_id") else "flow call",
            started_at=fields.time(item, "start_time"),
            stopped_at=fields.time(item, "end_time"),
            wait_till=fields.time(item, "next_scheduled_start_time"),
            operation_id=self._operation(item),
            extra=extra,
        )

    def _operation(self, item: dict[str, Any]) -> str | None:
        """A tag ``ledger.operation_id:<id>`` first, else a flow parameter ``operation_id``."""
        tags = item.get("tags")
        for tag in tags if isinstance(tags, list) else []:
            if isinstance(tag, str) and tag.startswith(self._tag):
                return fields.ident({"tag": tag[len(self._tag) :]}, "tag")
        params = item.get("parameters")
        if isinstance(params, dict) and isinstance(params.get(PARAMETER), str):
            return fields.ident(params, PARAMETER)
        return None

    def _name_flows(self, records: list[ExecutionRecord]) -> None:
        wanted = sorted({r.workflow_id for r in records if r.workflow_id} - set(self._flows))
        for start in range(0, len(wanted), MAX_LIMIT):
            ids = wanted[start : start + MAX_LIMIT]
            body, _ = self._call(
                "POST", "/flows/filter", {"flows": {"id": {"any_": ids}}, "limit": MAX_LIMIT}
            )
            if not isinstance(body, list):
                raise Malformed("Prefect's flow list is not a list")
            for flow in body:
                flow = fields.obj(flow, "a flow")
                flow_id, name = fields.ident(flow, "id"), fields.ident(flow, "name")
                if flow_id and name:
                    self._flows[flow_id] = name

    def _named(self, record: ExecutionRecord) -> ExecutionRecord:
        name = self._flows.get(record.workflow_id or "")
        if name is None:
            return record
        return ExecutionRecord(**{**record.__dict__, "workflow_name": name})


class _Walk:
    """Flow runs by ``expected_start_time``, page by page (see the module's docstring): yields
    the runs not yielded before, the answer's headers, and whether this was the last page.
    ``at`` is the time of the last run yielded and ``tied`` the ids yielded at that time."""

    def __init__(self, connector: PrefectConnector, at: str, tied: list[str]) -> None:
        self.connector = connector
        self.at = at
        self.tied = list(tied)

    def _ask(self, offset: int) -> tuple[list[dict[str, Any]], httpx.Headers]:
        return self.connector._list(
            {
                "sort": "EXPECTED_START_TIME_ASC",
                "limit": self.connector.limit,
                "offset": offset,
                "flow_runs": {"expected_start_time": {"after_": self.at}},
            }
        )

    def run(
        self, *, stop_at_now: bool
    ) -> Iterator[tuple[list[dict[str, Any]], httpx.Headers, bool]]:
        limit = self.connector.limit
        offset = 0  # only among runs that share the time ``at``
        restarts = 0
        while True:
            items, headers = self._ask(offset)
            now = server_time(headers, "Prefect") if stop_at_now else None
            when = [_expected(item) for item in items]
            if offset and not set(self.tied).intersection(str(i.get("id")) for i in items):
                restarts += 1  # the runs at this time moved by more than the overlap
                if restarts > MAX_RESTARTS:
                    raise ListMoved(
                        "Prefect's flow runs sharing one start time changed faster than they "
                        "could be read; the next try starts again from the stored position"
                    )
                offset = 0
                continue
            fresh: list[dict[str, Any]] = []
            ended = len(items) < limit
            seen = set(self.tied)
            for item, moment in zip(items, when, strict=True):
                if now is not None and moment > now:
                    ended = True  # scheduled in the future: read once its time has come
                    break
                run_id = str(item.get("id"))
                if run_id in seen:
                    continue
                stamp = moment.isoformat().replace("+00:00", "Z")
                if stamp != self.at:
                    self.at, self.tied, seen = stamp, [], set()
                self.tied.append(run_id)
                seen.add(run_id)
                fresh.append(item)
            if ended:
                yield fresh, headers, True
                return
            # A full page: the next starts at the last time read, or among the runs sharing
            # it when the whole page had that one time.
            tied_page = when[0] == when[-1]
            offset = offset + len(items) - max(1, min(ANCHOR, len(items) // 4)) if tied_page else 0
            yield fresh, headers, False


def _expected(item: dict[str, Any]) -> datetime:
    moment = fields.time(item, "expected_start_time")
    if moment is None:
        raise Malformed("a flow run has no expected_start_time")
    return moment


def execution_page(base_url: str, workflow_id: str | None, execution_id: str) -> str | None:
    """The flow run's page in Prefect's UI: Cloud's app for a Cloud API URL, else the server's
    own address without ``/api``."""
    parts = urlsplit(base_url.rstrip("/"))
    cloud = re.match(r"^/api/accounts/([^/]+)/workspaces/([^/]+)$", parts.path)
    if parts.hostname == "api.prefect.cloud" and cloud:
        account, workspace = cloud.groups()
        return (
            f"https://app.prefect.cloud/account/{account}/workspace/{workspace}"
            f"/runs/flow-run/{execution_id}"
        )
    if not parts.path.endswith("/api"):
        return None
    return f"{base_url.rstrip('/')[: -len('/api')]}/runs/flow-run/{execution_id}"


KIND = Kind(PrefectConnector.kind, "Prefect", PrefectConnector, execution_page=execution_page)
