"""What a connector refuses to take from a tool: bodies past the byte limit (read no further
than the limit), a read by id answered with another execution, and fields past their bounds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from flowledger.connectors import registry
from flowledger.connectors.base import Connector, ExecutionRecord, Malformed
from tests.support.fakes import EVERY_KIND, fake_for
from tests.support.fakes.airflow import FakeAirflow
from tests.support.fakes.n8n import FakeN8n

MIB = 1024 * 1024
JSON = {"content-type": "application/json"}
# How each tool's connector says a read by id was answered with another execution.
ANSWERED_ANOTHER = {
    "n8n": "asked for execution {asked}, n8n answered {answered}",
    "airflow": "asked for DAG run {asked}, Airflow answered {answered}",
    "prefect": "asked for flow run {asked}, Prefect answered {answered}",
}


@pytest.fixture(params=EVERY_KIND)
def fake(request: pytest.FixtureRequest) -> Any:
    return fake_for(request.param)


def connect(fake: Any, **kw: Any) -> Connector:
    return registry.build(fake.kind, fake.client(), fake.settings(**kw))


def drain(connector: Connector) -> list[ExecutionRecord]:
    return [record for page in connector.pages(None) for record in page.records]


class Body:
    """A response body sent a mebibyte at a time, counting how much of it was read."""

    def __init__(self, mebibytes: int) -> None:
        self.mebibytes = mebibytes
        self.read = 0

    def stream(self) -> Iterator[bytes]:
        chunk = b" " * MIB
        for _ in range(self.mebibytes):
            self.read += 1
            yield chunk


def fault_on_the_list(fake: Any, response: httpx.Response) -> Connector:
    """A connector whose next list request gets ``response`` (Airflow logs in first)."""
    connector = connect(fake)
    if fake.kind == "airflow":
        connector.check()
    fake.inject(response)
    return connector


# --------------------------------------------------------------------------- response size


def test_a_body_declared_over_the_limit_is_refused_before_any_of_it_is_read(fake: Any) -> None:
    fake.add(3)
    body = Body(20)
    declared = {**JSON, "content-length": str(10**9)}
    connector = fault_on_the_list(
        fake, httpx.Response(200, headers=declared, content=body.stream())
    )
    with pytest.raises(Malformed) as refused:
        drain(connector)
    assert str(refused.value) == (
        f"{httpx.URL(fake.base_url).copy_with(path=fake.list_path)} answered 1,000,000,000 bytes, "
        "over the 16,777,216-byte limit"
    )
    assert refused.value.stops_source and body.read == 0


def test_a_body_sent_without_its_length_is_read_no_further_than_the_limit(fake: Any) -> None:
    fake.add(3)
    body = Body(64)
    connector = fault_on_the_list(fake, httpx.Response(200, headers=JSON, content=body.stream()))
    with pytest.raises(Malformed) as refused:
        drain(connector)
    assert str(refused.value) == (
        f"{httpx.URL(fake.base_url).copy_with(path=fake.list_path)} answered more than the "
        "16,777,216-byte limit"
    )
    assert refused.value.stops_source and body.read == 17  # 16 MiB, and the chunk past it


def _custom_data_answer(fake: FakeN8n, body: bytes, **headers: str) -> None:
    def answer(request: httpx.Request) -> httpx.Response | None:
        if request.url.params.get("includeData") != "true":
            return None
        return httpx.Response(200, headers={**JSON, **headers}, content=body)

    fake.intercept = answer


def test_n8n_reads_an_execution_with_its_data_up_to_a_larger_limit_of_its_own() -> None:
    fake = FakeN8n()
    (ext_id,) = fake.add(1, workflow_id="wf-2")
    item = {
        **fake.executions[1],
        "customData": {"ledger.operation_id": "invoice:INV-7:send"},
        "data": {"resultData": {"runData": {"pad": "x" * (20 * MIB)}}},
    }
    _custom_data_answer(fake, json.dumps(item).encode())
    (record,) = drain(connect(fake, custom_data_workflows=("wf-2",)))
    assert (record.external_id, record.operation_id) == (ext_id, "invoice:INV-7:send")


def test_n8n_refuses_an_execution_with_its_data_over_its_limit_and_keeps_the_reason() -> None:
    fake = FakeN8n()
    fake.add(1, workflow_id="wf-2")
    _custom_data_answer(fake, b"{}", **{"content-length": str(40 * MIB)})
    (record,) = drain(connect(fake, custom_data_workflows=("wf-2",)))
    assert record.operation_id is None
    assert record.extra == {
        "custom_data": "http://n8n.test/api/v1/executions/1 answered 41,943,040 bytes, "
        "over the 33,554,432-byte limit"
    }


# --------------------------------------------------------------------------- reads by id


@pytest.mark.parametrize("kind", EVERY_KIND)
def test_a_read_by_id_answered_with_another_execution_is_refused(kind: str) -> None:
    fake: Any = fake_for(kind)
    asked, answered = fake.add(2, status="running")
    fake.intercept = lambda request: (
        httpx.Response(200, json=fake.record(answered))
        if request.url.path.endswith("/" + asked.rsplit("/", 1)[-1])
        else None
    )
    connector = connect(fake)
    with pytest.raises(Malformed) as refused:
        connector.fetch(asked)
    assert str(refused.value) == ANSWERED_ANOTHER[kind].format(asked=asked, answered=answered)
    assert refused.value.stops_source


# --------------------------------------------------------------------------- field bounds


@pytest.mark.parametrize("length", [1000, 1001])
def test_n8n_passes_back_a_cursor_of_up_to_1000_characters(length: int) -> None:
    fake = FakeN8n()
    fake.add(1)
    cursor = "c" * length

    def long_cursor(request: httpx.Request) -> httpx.Response | None:
        if request.url.params.get("cursor") == cursor:
            return httpx.Response(200, json={"data": [], "nextCursor": None})
        if request.url.path == fake.list_path:
            return httpx.Response(200, json={"data": [fake.record("1")], "nextCursor": cursor})
        return None

    fake.intercept = long_cursor
    if length > 1000:
        with pytest.raises(Malformed) as refused:
            drain(connect(fake))
        assert str(refused.value) == "the execution list's nextCursor is not a short string"
    else:
        assert [r.external_id for r in drain(connect(fake))] == ["1"]
        assert fake.list_requests()[-1].url.params["cursor"] == cursor


@pytest.mark.parametrize(
    ("value", "linked"),
    [
        ("o" * 200, "o" * 200),
        ("o" * 201, None),
        ("invoice:INV-7\nsend", None),
        ("", None),
        (42, None),
    ],
    ids=["200", "201", "control", "empty", "number"],
)
def test_n8n_links_by_custom_data_only_a_short_printable_operation_id(
    value: object, linked: str | None
) -> None:
    fake = FakeN8n()
    fake.add(1, workflow_id="wf-2")
    fake.custom[1] = {"ledger.operation_id": value}  # type: ignore[dict-item]
    (record,) = drain(connect(fake, custom_data_workflows=("wf-2",)))
    assert record.operation_id == linked


def _refused_field(field: str, value: str) -> str:
    return f"{field} {value!r} is empty, too long or not printable"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("id", "1" * 201, _refused_field("id", "1" * 59 + "…")),
        ("workflowId", "w" * 201, _refused_field("workflowId", "w" * 59 + "…")),
        ("status", "s" * 33, _refused_field("status", "s" * 33)),
        ("status", "", _refused_field("status", "")),
        ("mode", "web\x07hook", _refused_field("mode", "web hook")),
        ("startedAt", "2026-11-02T09:00:01.000Z" + " " * 17, "startedAt is not a time"),
    ],
    ids=["id-201", "workflowId-201", "status-33", "status-empty", "mode-control", "time-41"],
)
def test_n8n_refuses_a_field_past_its_bound(field: str, value: str, said: str) -> None:
    fake = FakeN8n()
    fake.add(1)
    fake.executions[1][field] = value
    with pytest.raises(Malformed) as refused:
        drain(connect(fake))
    assert str(refused.value) == said


@pytest.mark.parametrize(("length", "accepted"), [(8192, True), (8193, False)])
def test_airflow_takes_an_access_token_of_up_to_8192_characters(
    length: int, accepted: bool
) -> None:
    fake = FakeAirflow()
    fake.add(1)
    fake.token = "t" * length
    connector = connect(fake)
    if accepted:
        assert connector.check() == "Airflow API at http://airflow.test answers; 1 DAG run(s)"
    else:
        with pytest.raises(Malformed) as refused:
            connector.check()
        assert str(refused.value) == "Airflow's /auth/token answered without an access_token"
        assert [r.url.path for r in fake.requests] == ["/auth/token"]


@pytest.mark.parametrize(("run_id_length", "accepted"), [(99, True), (100, False)])
def test_airflow_names_a_run_in_at_most_200_characters(run_id_length: int, accepted: bool) -> None:
    fake = FakeAirflow()
    fake.add(1)
    fake.runs[1].update(dag_id="d" * 100, dag_run_id="r" * run_id_length)
    name = "d" * 100 + "/" + "r" * run_id_length
    if accepted:
        assert [r.external_id for r in drain(connect(fake))] == [name]
    else:
        with pytest.raises(Malformed) as refused:
            drain(connect(fake))
        assert str(refused.value) == "DAG run name " + "d" * 60 + "… is longer than 200 characters"


@pytest.mark.parametrize("total", [-1, True, "1", None, 1.0])
def test_airflow_refuses_a_list_without_a_count_it_can_use(total: object) -> None:
    fake = FakeAirflow()
    fake.add(1)
    fake.intercept = lambda request: (
        httpx.Response(
            200,
            json={"dag_runs": [fake.record(name) for name in fake.ids()], "total_entries": total},
            headers={"date": "Mon, 02 Nov 2026 09:00:00 GMT"},
        )
        if request.url.path == fake.list_path
        else None
    )
    with pytest.raises(Malformed) as refused:
        drain(connect(fake))
    assert str(refused.value) == "the DAG run list has no total_entries count"
