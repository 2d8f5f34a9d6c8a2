"""Read routes, health, readiness and metrics."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from flowledger.plumbing.metrics import REGISTRY
from flowledger.storage.models import Execution, table
from tests.support.builders import T0, dispatch_body
from tests.support.receiver import BODY_LIMIT, Api
from tests.support.times import odd_times, times_in


def test_one_operation_with_its_events(api: Api) -> None:
    api.post("/v1/operations/op-1/dispatch", dispatch_body())
    api.post("/v1/operations/op-1/confirm", {"receipt": "R-1"})
    detail = api.get("/v1/operations/op-1").json()
    assert detail["operation"]["state"] == "confirmed"
    assert [e["kind"] for e in detail["events"]] == ["dispatched", "confirmed"]
    assert detail["events"][0]["actor"] == "token:write"
    assert detail["receipts"][0]["receipt"] == "R-1"
    missing = api.get("/v1/operations/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_every_time_in_an_answer_is_written_one_way(api: Api) -> None:
    deadline = (T0 + timedelta(hours=1, microseconds=250_000)).isoformat()
    api.post("/v1/operations/op-1/dispatch", dispatch_body(deadline=deadline))
    api.post("/v1/operations/op-1/fail", {"outcome": "unknown", "error": "timeout"})
    answers = [
        api.get("/v1/operations/op-1").json(),
        api.get("/v1/operations").json(),
        api.get("/v1/holds").json(),
    ]
    for answer in answers:
        assert list(times_in(answer)), answer  # the check sees times
        assert odd_times(answer) == []
    detail = answers[0]
    # The events' data as stored, beside the columns: the same form.
    assert detail["operation"]["deadline"] == detail["events"][0]["data"]["deadline"]
    assert detail["operation"]["deadline"].endswith(".250000+00:00")
    assert detail["holds"][0]["opened_at"].endswith("+00:00")


def test_operations_by_state_and_hold_in_pages(api: Api) -> None:
    for n in range(5):
        api.post(f"/v1/operations/op-{n}/dispatch", dispatch_body(f"exec-{n}"))
    api.post("/v1/operations/op-1/confirm", {"receipt": "R"})
    api.post("/v1/operations/op-3/fail", {"outcome": "unknown"})

    page = api.get("/v1/operations", params={"limit": 2}).json()
    assert [o["operation_id"] for o in page["items"]] == ["op-0", "op-1"]
    rest = api.get("/v1/operations", params={"limit": 10, "after": page["next_after"]}).json()
    assert [o["operation_id"] for o in rest["items"]] == ["op-2", "op-3", "op-4"]
    assert rest["next_after"] is None

    def ids(**params: str) -> list[str]:
        return [o["operation_id"] for o in api.get("/v1/operations", params=params).json()["items"]]

    assert ids(state="confirmed") == ["op-1"]
    assert ids(hold="blocking") == ["op-3"]
    assert ids(hold="unknown_outcome") == ["op-3"]
    assert ids(hold="open", state="dispatching") == ["op-3"]
    assert ids(hold="none", state="dispatching") == ["op-0", "op-2", "op-4"]
    bad = api.get("/v1/operations", params={"state": "exploded"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "state"


def test_executions_kept_copies_including_gone_ones(api: Api) -> None:
    rows = [
        {"source": "prod", "external_id": "1", "status": "success", "gone_at": T0},
        {"source": "prod", "external_id": "2", "status": "error", "gone_at": None},
        {"source": "test", "external_id": "3", "status": "success", "gone_at": None},
    ]
    with api.ledger.store.engine.begin() as conn:
        for r in rows:
            conn.execute(
                table(Execution)
                .insert()
                .values(**r, final=True, first_seen_at=T0, last_seen_at=T0 + timedelta(hours=1))
            )

    def ids(**params: str) -> list[str]:
        got = api.get("/v1/executions", params=params).json()["items"]
        return [e["external_id"] for e in got]

    assert ids() == ["1", "2", "3"]
    assert ids(gone="true") == ["1"]
    assert ids(gone="false", source="prod") == ["2"]
    assert ids(status="success") == ["1", "3"]
    page = api.get("/v1/executions", params={"limit": 2}).json()
    assert (
        api.get("/v1/executions", params={"after": page["next_after"]}).json()["items"][0][
            "external_id"
        ]
        == "3"
    )
    with api.ledger.store.reader.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(table(Execution))).scalar() == 3


def test_health_readiness_and_metrics(api: Api) -> None:
    assert api.get("/healthz", token=None).json() == {"status": "ok"}
    assert api.get("/readyz", token=None).json() == {"status": "ready"}
    api.post("/v1/operations/op-1/dispatch", dispatch_body())
    api.post("/v1/operations/op-1/dispatch", dispatch_body("exec-2"))
    text = api.get("/metrics", token=None).text
    assert 'flowledger_dispatch_decisions_total{decision="hold",reason="in_flight"}' in text
    assert 'route="/v1/operations/{operation_id:path}/dispatch"' in text


def _latencies(route: str, status: str) -> float:
    value = REGISTRY.get_sample_value(
        "flowledger_http_request_duration_seconds_count",
        {"route": route, "method": "POST", "status": status},
    )
    return value or 0.0


def test_each_answer_is_timed_under_its_route_and_status(api: Api) -> None:
    dispatch = "/v1/operations/{operation_id:path}/dispatch"
    counted = {
        (route, status): _latencies(route, status)
        for route, status in ((dispatch, "200"), (dispatch, "401"), ("unmatched", "413"))
    }
    assert api.post("/v1/operations/t-1/dispatch", dispatch_body()).status_code == 200
    assert api.post("/v1/operations/t-1/dispatch", dispatch_body(), token=None).status_code == 401
    too_big = api.post("/v1/nowhere", content=b"x" * (BODY_LIMIT + 1))
    assert too_big.status_code == 413  # refused before any route, on its Content-Length
    for key, before in counted.items():
        assert _latencies(*key) == before + 1, key


def test_readiness_fails_when_the_schema_is_not_current(api: Api) -> None:
    with api.ledger.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE ledger_meta SET value = '999' WHERE key = 'schema_version'"))
    answer = api.get("/readyz", token=None)
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "not_ready"


def test_openapi_documents_every_route(api: Api) -> None:
    spec = api.get("/openapi.json", token=None).json()
    paths = set(spec["paths"])
    for path in (
        "/v1/operations/{operation_id}/dispatch",
        "/v1/operations/{operation_id}/confirm",
        "/v1/hooks/n8n/error",
        "/v1/executions",
    ):
        assert path in paths
    body = spec["paths"]["/v1/operations/{operation_id}/dispatch"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"].endswith("/DispatchCreate")
    assert api.get("/docs", token=None).status_code == 200
