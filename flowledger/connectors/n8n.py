"""n8n's public API (``/api/v1``), read newest first down to what the ledger already has.

Facts this relies on (n8n-io/n8n ``public-api/v1/handlers/executions``): the list is ordered by
id descending and paged by an opaque cursor (base64 of ``{lastId, limit}`` today, never built
here); ``limit`` is at most 250; executions active at that moment are left out of the list
unless ``status=running`` is asked, and ``waiting`` ones have gone missing from it; by id, any
execution is returned, running or not, and a pruned or deleted one is 404. While starting, n8n
answers every path with ``200 text/html`` "n8n is starting up".

The position is a small JSON object: ``high`` — every id up to it has been listed — and, while
a run is part-way, ``top`` (the newest id of that run), ``low`` (the lowest id listed so far)
and ``cursor`` (where to go on). Ids are decimal strings, ordered as numbers. An id missing
between two listed ones (a *hole*) may be an execution the list left out because it was
running or waiting: holes above ``high`` are probed by id, a bounded number per run.

A read by id that keeps failing with 5xx while the list answers is that execution's alone; once
the sync has spent its retries on it, the run passes over it (:meth:`N8nConnector.pass_over`)
rather than stopping there on every run while n8n prunes what the ledger never got.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import httpx

from flowledger.connectors import fields
from flowledger.connectors.base import (
    STATUSES,
    AuthFailed,
    ConnectorError,
    ExecutionRecord,
    Kind,
    Malformed,
    NoApi,
    NotReady,
    Page,
    ServerError,
    Settings,
    clean_text,
)
from flowledger.connectors.http import BadRequest, NotFound, PageNotFound, public_url, request_json
from flowledger.connectors.n8n_versions import VersionReads, version_id

MAX_LIMIT = 250
NON_FINAL = frozenset({"new", "running", "waiting"})
FINAL = frozenset(STATUSES) - NON_FINAL
STARTING = "n8n is starting up"
MAX_PROBES = 100
MAX_CURSOR = 1000
MAX_DATA_BODY = 32 * 1024 * 1024
_NO_API = (
    "no n8n public API at {api} (404): check base_url, or whether the API is disabled "
    "(N8N_PUBLIC_API_DISABLED)"
)


class N8nConnector(VersionReads):
    """Reads one n8n instance through ``client``; holds nothing but a cache of workflow names."""

    kind = "n8n"

    def __init__(self, client: httpx.Client, settings: Settings, *, max_probes: int = MAX_PROBES):
        self.client = client
        self.settings = settings
        self.api = settings.base_url.rstrip("/") + "/api/v1"
        self.limit = max(1, min(settings.page_size, MAX_LIMIT))
        self.max_probes = max_probes
        self._names: dict[str, str] | None = None
        self._passed: dict[str, str] = {}  # reads given up on this run, and why
        self._relisted = False  # listed again from the newest after a refused cursor
        self.notes: list[str] = []

    # ------------------------------------------------------------------ HTTP

    def _get(self, path: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        if not self.settings.api_key:
            raise AuthFailed("no n8n API key: set the environment variable named by api_key_env")
        body, _ = request_json(
            self.client,
            "GET",
            self.api + path,
            tool="n8n",
            headers={"X-N8N-API-KEY": self.settings.api_key, "Accept": "application/json"},
            params=params,
            starting_marker=STARTING,
            **kw,
        )
        return body

    def _by_id(self, external_id: str, *, data: bool = False) -> Any:
        """One execution by id; a 5xx names the read (see :meth:`pass_over`)."""
        try:
            if data:
                return self._get(
                    f"/executions/{_quote(external_id)}",
                    {"includeData": "true"},
                    max_body=MAX_DATA_BODY,
                )
            return self._get(f"/executions/{_quote(external_id)}")
        except ServerError as exc:
            exc.record = _read(external_id, data=data)
            raise

    def _list(self, params: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        try:
            body = self._get("/executions", params)
        except PageNotFound as exc:
            if self._starting():
                raise NotReady(f"n8n at {public_url(self.api)} is still starting up (its "
                               "readiness answers 503); try again shortly") from exc  # fmt: skip
            raise NoApi(_NO_API.format(api=public_url(self.api))) from exc
        except NotFound as exc:
            raise NoApi(_NO_API.format(api=public_url(self.api))) from exc
        raw = fields.items(body, "data", "the execution list")
        nxt = body.get("nextCursor")
        if nxt is not None and (not isinstance(nxt, str) or not nxt or len(nxt) > MAX_CURSOR):
            raise Malformed("the execution list's nextCursor is not a short string")
        return [fields.obj(item, "an execution") for item in raw], nxt

    def _starting(self) -> bool:
        """Whether n8n says it is not ready yet (``/healthz/readiness`` 503): the page 404
        of an API route is then its start, not a base_url without the API."""
        url = self.settings.base_url.rstrip("/") + "/healthz/readiness"
        try:
            return self.client.get(url).status_code == 503
        except httpx.HTTPError:
            return False

    # ------------------------------------------------------------------ Protocol

    def pages(self, position: str | None) -> Iterator[Page]:
        pos = fields.position(position, "n8n")
        high = _num(pos.get("high"))
        top = _num(pos.get("top"))
        low = _num(pos.get("low"))
        cursor = pos.get("cursor")
        probes = self.max_probes
        while True:
            params: dict[str, Any] = {"limit": self.limit}
            if cursor:
                params["cursor"] = cursor
            try:
                raw, nxt = self._list(params)
            except BadRequest as exc:
                if not cursor:
                    raise
                if self._relisted:
                    raise Malformed(
                        f"n8n refused a cursor again after listing from the newest: {exc}"
                    ) from exc
                # A cursor the tool no longer takes: list again from the newest, once a run;
                # what is already stored is stored again, unchanged.
                self._relisted = True
                cursor, low = None, None
                continue
            # Each record is made once, named: ``dataclasses.replace`` on every record of a
            # backfill cost as much as reading it.
            rows = [self._fields(item) for item in raw]
            ids = [int(r["external_id"]) for r in rows]  # _fields checked: decimal
            listed = set(ids)
            if listed:
                top = max(listed) if top is None else max(top, max(listed))
            kept = [r for r, i in zip(rows, ids, strict=True) if high is None or i > high]
            reached = nxt is None or not listed or (high is not None and min(listed) <= high)
            floor = min(listed) if listed else None
            if reached and high is not None:
                floor = high + 1
            self._name(kept)
            fresh = [self._custom_data(ExecutionRecord(**r)) for r in kept]
            found, probes = self._probe_holes(low, floor, listed, probes)  # named by fetch
            fresh.extend(found)
            if listed:
                low = min(listed) if low is None else min(low, min(listed))
            if reached:
                done = max((v for v in (high, top) if v is not None), default=None)
                yield Page(fresh, _dump_position({"high": _str(done)}))
                return
            yield Page(
                fresh,
                _dump_position(
                    {"high": _str(high), "top": _str(top), "low": _str(low), "cursor": nxt}
                ),
            )
            cursor = nxt

    def fetch(self, external_id: str) -> ExecutionRecord | None:
        try:
            body = self._by_id(external_id)
        except NotFound:
            return None
        row = self._fields(fields.obj(body, "the execution"))
        if row["external_id"] != external_id:
            raise Malformed(f"asked for execution {external_id}, n8n answered {row['external_id']}")
        self._name([row])
        return self._custom_data(ExecutionRecord(**row))

    def present_ids(self) -> Iterator[list[str]]:
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": MAX_LIMIT}
            if cursor:
                params["cursor"] = cursor
            raw, cursor = self._list(params)
            yield [fields.ident(item, "id", required=True) or "" for item in raw]
            if cursor is None or not raw:
                return

    def check(self) -> str:
        where = public_url(self.api)
        try:
            raw, _ = self._list({"limit": 1})
        except Malformed as exc:
            raise Malformed(f"not the n8n public API: {exc}") from exc
        newest = fields.ident(raw[0], "id") if raw else None
        tail = f"newest listed execution {newest}" if newest else "no executions listed yet"
        return f"n8n public API at {where} answers; {tail}"

    def pass_over(self, exc: ConnectorError) -> None:
        """A probed id is left out, for the walk of the whole list to recover once it is
        listed; a ``customData`` read leaves the execution without it, the reason in
        ``extra`` as for a malformed answer."""
        if exc.record is None:
            raise exc
        self._passed[exc.record] = clean_text(exc, 200)
        self.notes.append(f"passed over the read of {exc.record}: {clean_text(exc, 200)}")

    # ------------------------------------------------------------------ records

    def _fields(self, item: dict[str, Any]) -> dict[str, Any]:
        """The :class:`ExecutionRecord` fields of one listed or fetched execution."""
        external_id = fields.ident(item, "id", required=True)
        assert external_id is not None
        if not external_id.isdigit():
            raise Malformed(f"execution id {clean_text(external_id, 40)!r} is not a number")
        status = fields.text(item, "status", limit=32)
        if status is None:  # old n8n: only the deprecated ``finished`` flag
            status = "success" if item.get("finished") is True else "unknown"
        extra: dict[str, str] = {}
        version = version_id(item.get("workflowVersionId"))
        if version is not None:
            extra["workflow_version_id"] = version
        return {
            "external_id": external_id,
            "status": status,
            "final": status in FINAL,
            "workflow_id": fields.ident(item, "workflowId"),
            "mode": fields.text(item, "mode", limit=32),
            "started_at": fields.time(item, "startedAt"),
            "stopped_at": fields.time(item, "stoppedAt"),
            "retry_of": fields.ident(item, "retryOf"),
            "retry_success_id": fields.ident(item, "retrySuccessId"),
            "wait_till": fields.time(item, "waitTill"),
            "extra": extra,
        }

    def _probe_holes(
        self, above: int | None, floor: int | None, listed: set[int], budget: int
    ) -> tuple[list[ExecutionRecord], int]:
        """Ask by id for the executions missing between the listed ones."""
        if floor is None or budget <= 0:
            return [], budget
        start = above - 1 if above is not None else (max(listed) if listed else None)
        if start is None:
            return [], budget
        found: list[ExecutionRecord] = []
        candidate = start
        while candidate >= floor and budget > 0:
            if candidate not in listed and _read(str(candidate)) not in self._passed:
                budget -= 1
                record = self.fetch(str(candidate))
                if record is not None:
                    found.append(record)
            candidate -= 1
        return found, budget

    def _name(self, rows: list[dict[str, Any]]) -> None:
        """Add each row's workflow name, the names read once a run (only when a row needs
        one: a poll with nothing new asks for nothing else)."""
        if not any(r["workflow_id"] for r in rows):
            return
        if self._names is None:
            self._load_names()
        for r in rows:
            if r["workflow_id"] and r.get("workflow_name") is None and self._names:
                name = self._names.get(r["workflow_id"])
                if name:
                    r["workflow_name"] = name

    def _load_names(self) -> None:
        """Every workflow's name, once per run (a connector lives for one run)."""
        names: dict[str, str] = {}
        cursor: str | None = None
        try:
            while True:
                params: dict[str, Any] = {"limit": MAX_LIMIT}
                if cursor:
                    params["cursor"] = cursor
                body = self._get("/workflows", params)
                for item in fields.items(body, "data", "the workflow list"):
                    item = fields.obj(item, "a workflow")
                    wid = fields.ident(item, "id")
                    name = item.get("name")
                    if wid and isinstance(name, str):
                        names[wid] = clean_text(name, 400)
                cursor = body.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
        except (AuthFailed, NotFound) as exc:
            self.notes.append(f"workflow names unavailable: {exc}")
        self._names = names

    def _custom_data(self, record: ExecutionRecord) -> ExecutionRecord:
        """The operation id the execution declared in its customData, for the configured
        workflows only: reading it needs ``includeData``, which carries the whole run."""
        key = self.settings.custom_data_key
        if not record.final or record.workflow_id not in self.settings.custom_data_workflows:
            return record
        passed = self._passed.get(_read(record.external_id, data=True))
        if passed is not None:
            return replace(record, extra={**record.extra, "custom_data": passed})
        try:
            body = self._by_id(record.external_id, data=True)
        except NotFound:
            return record
        except Malformed as exc:
            return replace(record, extra={**record.extra, "custom_data": clean_text(exc, 200)})
        custom = body.get("customData") if isinstance(body, dict) else None
        value = custom.get(key) if isinstance(custom, dict) else None
        if isinstance(value, str) and 0 < len(value) <= 200 and value.isprintable():
            return replace(record, operation_id=value)
        return record


def _quote(external_id: str) -> str:
    return quote(external_id, safe="")


def _read(external_id: str, *, data: bool = False) -> str:
    """How a read by id is named in a :class:`ConnectorError` and in the notes."""
    return f"customData of execution {external_id}" if data else f"execution {external_id}"


def _num(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _str(value: int | None) -> str | None:
    return None if value is None else str(value)


def _dump_position(data: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in data.items() if v is not None}, sort_keys=True)


def execution_page(base_url: str, workflow_id: str | None, execution_id: str) -> str | None:
    """n8n's editor page for one execution, which lives under its workflow."""
    if not workflow_id:
        return None
    return f"{base_url.rstrip('/')}/workflow/{workflow_id}/executions/{execution_id}"


KIND = Kind(
    N8nConnector.kind, "n8n", N8nConnector, needs_api_key=True, execution_page=execution_page
)
