"""Apache Airflow 3.x (``/api/v2``): DAG runs as executions, named ``<dag_id>/<dag_run_id>``.

Facts this relies on (observed on Airflow 3.1): a JWT from ``POST /auth/token`` (``GET`` when
every user is admin); ``GET /api/v2/dags/~/dagRuns`` pages by ``limit``/``offset`` with
``limit`` capped by the server's ``maximum_page_limit`` (default 100), filters with
``updated_at_gte`` and sorts with ``order_by=id``, though items carry neither ``id`` nor
``updated_at``. So the position is a time: the ``Date`` of the server's first answer in a
run, less a margin, becomes the next run's ``updated_at_gte``; a run updated while we page is
read again next time (storing it twice changes nothing).

Offsets move when the list changes underneath: a run deleted between two pages shifts every
later row one place back, and a plain ``offset += limit`` skips one. Without an ``id`` in the
items there is no key to page by, so each page starts a few rows before where the last one
ended and must hold a run already read (the last names read are stored in the position as
``tail`` for a run that resumes). Such a page is contiguous with what came before, so nothing
between them was skipped, and what it repeats is left out; the last rows of each page count
only once the next page has read them again, so a run deleted in between is not reported
present. A page without any run already read means the list moved by more than the overlap:
the walk steps back, twice as far each time, until it finds one (at offset 0 at the latest).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx

from flowledger.connectors import fields
from flowledger.connectors.base import (
    AuthFailed,
    ConnectorError,
    ExecutionRecord,
    Kind,
    Malformed,
    NoApi,
    Page,
    Settings,
)
from flowledger.connectors.http import NotFound, public_url, request_json, server_time

STATUS = {"queued": "new", "running": "running", "success": "success", "failed": "error"}
MARGIN = timedelta(minutes=2)
HELD = 3  # rows at the end of a page yielded only with the next page (at most a quarter)
ANCHOR = 5  # rows before the held ones the next page reads again (at most a quarter)
TAIL_CHARS = 1500  # of the 4,000 a stored position may take
MAX_STEPS_BACK = 64  # a list changing faster than a walk can read it: try again later


class ListMoved(ConnectorError):
    """The DAG run list changed faster than a walk could read it; the next try starts again
    from the stored position."""

    retryable = True


class AirflowConnector:
    kind = "airflow"

    def __init__(self, client: httpx.Client, settings: Settings):
        self.client = client
        self.settings = settings
        self.base = settings.base_url.rstrip("/")
        self.limit = max(2, min(settings.page_size, 1000))  # a page overlaps the one before
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
        started = pos.get("started")
        params: dict[str, Any] = {"updated_at_gte": since} if since else {}
        tail = pos.get("tail")
        names = [str(n) for n in tail] if isinstance(tail, list) else []
        walk = _Walk(self, params, int(pos.get("offset", 0)), names)
        for items, headers, done in walk:
            if started is None:
                started = _server_time(headers).isoformat()
            records = [self._record(item) for item in items]
            if done:
                yield Page(records, json.dumps({"since": started}), walk.total)
                return
            at = {"since": since, "offset": walk.offset, "started": started, "tail": walk.tail}
            yield Page(records, json.dumps(at), walk.total)

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
        for items, _, _ in _Walk(self, {}, 0, []):
            yield [self._name(item) for item in items]

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


class _Walk:
    """The DAG run list in id order, page by page, each page overlapping the one before it
    (see the module's docstring): yields the runs not yielded before, the answer's headers,
    and whether this was the last page.

    A page's last :data:`HELD` rows are held back: the next page reads them again and yields
    them, so one deleted in between is never yielded (the sync asks for it by id, and the
    404 marks it gone). The next page starts :data:`ANCHOR` rows before the held ones, and
    must hold a run already yielded: then it starts before every held row, wherever the list
    moved. ``offset`` is where the held rows start and ``tail`` the last names yielded, the
    position a resumed walk starts from.
    """

    def __init__(
        self, connector: AirflowConnector, params: dict[str, Any], offset: int, tail: list[str]
    ) -> None:
        self.connector = connector
        self.params = params
        self.offset = offset
        self.tail = tail
        self.seen = set(tail)  # every name yielded (as the sync keeps every present id)
        self.total: int | None = None

    def __iter__(self) -> Iterator[tuple[list[dict[str, Any]], httpx.Headers, bool]]:
        steps_back = 0
        back = self.connector.limit
        at = max(0, self.offset - len(self.tail))  # resumed: the tail rows come first
        while True:
            params = {**self.params, "limit": self.connector.limit, "offset": at}
            body, headers = self.connector._list({**params, "order_by": "id"})
            raw, self.total = _runs(body)
            items = [fields.obj(item, "a DAG run") for item in raw]
            names = [self.connector._name(item) for item in items]
            if at > 0 and self.seen and self.seen.isdisjoint(names):
                # The list moved by more than the overlap (or shrank below the offset): go
                # back, twice as far each time, until a page holds a run already yielded.
                steps_back += 1
                if steps_back > MAX_STEPS_BACK:
                    raise ListMoved(
                        "Airflow's DAG run list changed faster than it could be read; the "
                        "next try starts again from the stored position"
                    )
                at = max(0, at - back)
                back *= 2
                continue
            back = self.connector.limit
            end = at + len(raw)
            done = not raw or end >= self.total
            if not done and len(raw) < 2:
                raise Malformed(
                    "Airflow answered a page of fewer than 2 DAG runs: raise maximum_page_limit"
                )
            held = 0 if done else min(HELD, len(raw) // 4)
            kept = len(raw) - held
            fresh = [
                item
                for item, n in zip(items[:kept], names[:kept], strict=True)
                if n not in self.seen
            ]
            self.seen.update(names[:kept])
            self.offset = end - held
            self.tail = _tail(names[:kept])
            at = self.offset - max(1, min(ANCHOR, len(raw) // 4))
            yield fresh, headers, done
            if done:
                return


def _tail(names: list[str]) -> list[str]:
    """The last :data:`ANCHOR` names, fewer if they would make the stored position long (a
    name is up to 200 characters, escaped twice where it is stored)."""
    tail: list[str] = []
    size = 0
    for name in reversed(names[-ANCHOR:]):
        size += len(json.dumps(json.dumps(name)))
        if size > TAIL_CHARS:
            break
        tail.insert(0, name)
    return tail


def _runs(body: Any) -> tuple[list[Any], int]:
    raw = fields.items(body, "dag_runs", "the DAG run list")
    total = body.get("total_entries")
    if not isinstance(total, int) or isinstance(total, bool) or total < 0:
        raise Malformed("the DAG run list has no total_entries count")
    return raw, total


def _server_time(headers: httpx.Headers) -> datetime:
    """When the server answered, by its own clock, less a margin for runs updated meanwhile."""
    return server_time(headers, "Airflow") - MARGIN


# Airflow logs in with a user and password, and only when it asks for them; no page of its own
# is linked for a DAG run.
KIND = Kind(AirflowConnector.kind, "Airflow", AirflowConnector)
