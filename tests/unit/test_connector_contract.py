"""The Protocol's contract, checked on every connector against its own fake tool."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest

from flowledger.connectors import registry
from flowledger.connectors.base import (
    AuthFailed,
    Connector,
    ConnectorError,
    ExecutionRecord,
    Malformed,
    NoApi,
    NotReady,
    RateLimited,
    ServerError,
    Unreachable,
)
from flowledger.connectors.n8n import N8nConnector
from tests.support.fakes import EVERY_KIND, fake_for
from tests.support.fakes.airflow import FakeAirflow
from tests.support.fakes.n8n import FakeN8n


@pytest.fixture(params=EVERY_KIND)
def fake(request: pytest.FixtureRequest) -> Any:
    return fake_for(request.param)


def connect(fake: Any, **kw: Any) -> Connector:
    return registry.build(fake.kind, fake.client(), fake.settings(**kw))


def drain(connector: Connector, position: str | None) -> tuple[list[ExecutionRecord], str | None]:
    records: list[ExecutionRecord] = []
    for page in connector.pages(position):
        records.extend(page.records)
        position = page.position
    return records, position


def test_a_backfill_returns_every_execution_once(fake: Any) -> None:
    made = fake.add(230)
    records, position = drain(connect(fake, page_size=50), None)
    assert sorted(r.external_id for r in records) == sorted(made)
    assert position is not None


def test_resuming_from_each_stored_position_leaves_no_gap_and_no_duplicate(fake: Any) -> None:
    fake.add(230)
    seen: list[str] = []
    position: str | None = None
    for _ in range(50):  # a new connector for every page, as if the process died after each
        page = next(iter(connect(fake, page_size=50).pages(position)))
        seen.extend(r.external_id for r in page.records)
        if not page.records and page.position == position:
            break
        position = page.position
    assert sorted(seen) == sorted(fake.ids())


def test_an_incremental_read_returns_only_what_is_new(fake: Any) -> None:
    fake.add(30)
    _, position = drain(connect(fake), None)
    assert drain(connect(fake), position)[0] == []
    new = fake.add(3)
    records, _ = drain(connect(fake), position)
    assert sorted(r.external_id for r in records) == sorted(new)


def test_nothing_new_costs_one_list_request(fake: Any) -> None:
    fake.add(30)
    _, position = drain(connect(fake), None)
    before = len(fake.requests)
    drain(connect(fake), position)
    assert len(fake.list_requests()) >= 1
    assert len(fake.requests) - before <= (2 if fake.kind == "airflow" else 1)  # + login


def test_fetch_returns_the_execution_or_none_when_the_tool_lost_it(fake: Any) -> None:
    first, second = fake.add(2, status="running")
    connector = connect(fake)
    record = connector.fetch(first)
    assert record is not None and record.external_id == first and not record.final
    assert record.status == "running"
    fake.set_status(first, "success")
    refreshed = connector.fetch(first)
    assert refreshed is not None and refreshed.final and refreshed.status == "success"
    fake.delete(second)
    assert connector.fetch(second) is None


def test_present_ids_lists_everything_the_tool_holds(fake: Any) -> None:
    fake.add(120)
    fake.prune(15)
    ids = [i for page in connect(fake).present_ids() for i in page]
    assert sorted(ids) == sorted(fake.ids())


def test_check_says_what_answered(fake: Any) -> None:
    fake.add(1)
    assert "answers" in connect(fake).check()


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(401, json={"message": "unauthorized"}), AuthFailed),
        (httpx.Response(403, json={"message": "Forbidden"}), AuthFailed),
        (httpx.Response(429, headers={"retry-after": "7"}), RateLimited),
        (httpx.Response(502, text="bad gateway"), ServerError),
        (
            httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}),
            Malformed,
        ),
        (httpx.Response(200, json={"unexpected": True}), Malformed),
        (httpx.Response(200, json={"data": [], "dag_runs": [], "nextCursor": 7}), Malformed),
        (
            httpx.Response(
                200,
                content=b"[" * 64,
                headers={"content-length": str(10**9), "content-type": "application/json"},
            ),
            Malformed,
        ),
        (
            httpx.Response(200, text="{not json", headers={"content-type": "application/json"}),
            Malformed,
        ),
    ],
)
def test_failures_become_named_errors(fake: Any, response: httpx.Response, error: type) -> None:
    fake.add(3)
    connector = connect(fake)
    if fake.kind == "airflow":
        connector.check()  # log in first so the fault lands on the data request
        fake.faults.extend([response, response])  # a 401/403 is retried once with a new token
    else:
        fake.inject(response)
    with pytest.raises(error) as caught:
        drain(connector, None)
    message = str(caught.value)
    assert fake.api_key not in message and "\n" not in message
    if error is RateLimited:
        assert caught.value.retry_after == "7"


def test_an_unreachable_tool_is_said_plainly(fake: Any) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    connector = registry.build(fake.kind, client, fake.settings())
    with pytest.raises(Unreachable, match="cannot reach"):
        connector.check()


def test_n8n_starting_up_is_not_ready_never_data() -> None:
    fake = FakeN8n()
    fake.add(5)
    fake.starting = True
    with pytest.raises(NotReady, match="starting up"):
        drain(connect(fake), None)
    with pytest.raises(NotReady):
        connect(fake).check()


def test_n8n_page_404_is_its_start_while_its_readiness_says_so_else_no_api() -> None:
    fake = FakeN8n()
    fake.add(5)
    page = "<!DOCTYPE html><html><body><pre>Cannot GET /api/v1/executions</pre></body></html>"
    fake.readiness = 503
    fake.inject(httpx.Response(404, text=page, headers={"content-type": "text/html"}))
    with pytest.raises(NotReady, match="still starting up") as caught:
        drain(connect(fake), None)
    assert caught.value.retryable and not caught.value.stops_source
    # A page 404 by id while starting is not an execution gone.
    fake.inject(httpx.Response(404, text=page, headers={"content-type": "text/html"}))
    with pytest.raises(NotReady):
        connect(fake).fetch("5")
    fake.readiness = 200  # ready: that page means no API at base_url
    fake.inject(httpx.Response(404, text=page, headers={"content-type": "text/html"}))
    with pytest.raises(NoApi, match="no n8n public API"):
        drain(connect(fake), None)


def test_n8n_limit_is_capped_at_250_and_the_cursor_is_passed_back_untouched() -> None:
    fake = FakeN8n()
    fake.add(600)
    records, _ = drain(connect(fake, page_size=1000), None)
    assert len(records) == 600
    lists = fake.list_requests()
    assert [r.url.params.get("limit") for r in lists] == ["250"] * 3
    assert "cursor" not in lists[0].url.params and all("cursor" in r.url.params for r in lists[1:])


def test_n8n_finds_executions_the_list_leaves_out_by_asking_for_them_by_id() -> None:
    fake = FakeN8n()
    fake.add(10)
    _, position = drain(connect(fake), None)
    running, _, waiting, _ = (
        fake.add(1, status="running") + fake.add(1) + fake.add(1, status="waiting") + fake.add(1)
    )
    fake.unlisted.add(int(waiting))
    records, _ = drain(connect(fake), position)
    by_id = {r.external_id: r for r in records}
    assert by_id[running].status == "running" and by_id[waiting].status == "waiting"
    assert len(by_id) == 4


def test_n8n_names_workflows_and_reads_custom_data_only_where_configured() -> None:
    fake = FakeN8n()
    plain, linked = fake.add(1) + fake.add(1, workflow_id="wf-2")
    fake.custom[int(linked)] = {"ledger.operation_id": "invoice:INV-7:send"}
    fake.custom[int(plain)] = {"ledger.operation_id": "never-read"}
    records, _ = drain(connect(fake, custom_data_workflows=("wf-2",)), None)
    by_id = {r.external_id: r for r in records}
    assert by_id[plain].workflow_name == "send invoices" and by_id[plain].operation_id is None
    assert by_id[linked].operation_id == "invoice:INV-7:send"
    with_data = [r for r in fake.requests if r.url.params.get("includeData") == "true"]
    assert [r.url.path for r in with_data] == [f"/api/v1/executions/{linked}"]


def test_n8n_names_a_failing_read_by_id_and_goes_on_without_it_once_passed_over() -> None:
    fake = FakeN8n()
    fake.add(3, workflow_id="wf-2")
    fake.intercept = lambda request: (
        httpx.Response(503, json={"message": "out of memory"})
        if request.url.path == "/api/v1/executions/2"
        else None
    )
    connector = N8nConnector(fake.client(), fake.settings(custom_data_workflows=("wf-2",)))
    with pytest.raises(ServerError) as failed:
        drain(connector, None)
    assert failed.value.record == "customData of execution 2"
    connector.pass_over(failed.value)
    records, _ = drain(connector, None)
    by_id = {r.external_id: r for r in records}
    assert set(by_id) == {"1", "2", "3"} and by_id["2"].operation_id is None
    assert "503" in by_id["2"].extra["custom_data"] and "execution 2" in connector.notes[0]


def test_a_failing_list_names_no_record_to_pass_over(fake: Any) -> None:
    fake.add(2)
    fake.inject(httpx.Response(500, json={"message": "boom"}))
    connector = connect(fake)
    with pytest.raises(ServerError) as failed:
        drain(connector, None)
    assert failed.value.record is None
    with pytest.raises(ServerError):
        connector.pass_over(failed.value)


def test_n8n_lists_again_from_the_newest_once_a_run_when_its_cursor_is_refused() -> None:
    fake = FakeN8n()
    fake.add(300)
    fake.intercept = lambda request: (
        httpx.Response(400, json={"message": "An invalid cursor was provided"})
        if "cursor" in request.url.params
        else None
    )
    pages = connect(fake).pages(None)
    with pytest.raises(Malformed, match="refused a cursor again after listing from the newest"):
        list(itertools.islice(pages, 10))
    assert ["cursor" in r.url.params for r in fake.list_requests()] == [False, True, False, True]


def test_n8n_refuses_an_execution_id_that_is_not_a_number() -> None:
    fake = FakeN8n()
    fake.add(1)
    fake.executions[1]["id"] = "../../etc"
    with pytest.raises(Malformed, match="not a number"):
        drain(connect(fake), None)


def test_n8n_without_a_key_is_an_auth_failure_before_any_request() -> None:
    fake = FakeN8n()
    connector = registry.build("n8n", fake.client(), fake.settings().__class__(fake.base_url))
    with pytest.raises(AuthFailed, match="api_key_env"):
        connector.check()
    assert fake.requests == []


def test_n8n_asks_for_at_most_its_budget_of_holes_newest_first() -> None:
    fake = FakeN8n()
    fake.add(1)
    _, position = drain(connect(fake), None)
    hidden = fake.add(10, status="waiting")
    fake.unlisted.update(int(i) for i in hidden)
    fake.add(1)
    connector = N8nConnector(fake.client(), fake.settings(), max_probes=3)
    records, _ = drain(connector, position)
    assert {r.external_id for r in records if r.status == "waiting"} == set(hidden[-3:])


def test_a_base_url_without_the_api_stops_with_a_plain_reason(fake: Any) -> None:
    fake.add(2)
    connector = connect(fake)
    if fake.kind == "airflow":
        connector.check()
    fake.inject(httpx.Response(404, text="Not Found"))
    with pytest.raises(NoApi, match="check base_url") as caught:
        drain(connector, None)
    assert caught.value.stops_source


def test_a_redirect_is_named_with_where_it_points_without_its_query(fake: Any) -> None:
    fake.add(1)
    connector = connect(fake)
    if fake.kind == "airflow":
        connector.check()
    fake.inject(httpx.Response(302, headers={"location": "https://sso.example.com/login?t=s3cr3t"}))
    with pytest.raises(NoApi) as e:
        drain(connector, None)
    assert "redirects (302) to https://sso.example.com/login:" in str(e.value)
    assert "s3cr3t" not in str(e.value)


def test_airflow_logs_in_with_its_credentials_and_again_when_the_token_expires() -> None:
    fake = FakeAirflow()
    fake.add(3)
    connector = connect(fake, username="etl", password="pw-123")
    assert len(drain(connector, None)[0]) == 3
    login = [r for r in fake.requests if r.url.path == "/auth/token"]
    assert [r.method for r in login] == ["POST"]
    assert json.loads(login[0].content) == {"username": "etl", "password": "pw-123"}
    fake.token = "jwt.renewed"  # the old token now answers 403 "Invalid JWT token"
    assert len(drain(connector, None)[0]) == 3
    assert len([r for r in fake.requests if r.url.path == "/auth/token"]) == 2


@pytest.mark.parametrize(
    ("response", "said"),
    [
        (
            httpx.Response(405, json={"detail": "Method Not Allowed"}),
            "does not allow GET (405 Method Not Allowed)",
        ),
        (
            httpx.Response(400, text="<html>Bad</html>", headers={"content-type": "text/html"}),
            "answered with an HTML page (400 Bad Request)",
        ),
        (
            httpx.Response(200, text="<html>UI</html>", headers={"content-type": "text/html"}),
            "not JSON",
        ),
    ],
)
def test_an_answer_from_something_else_than_the_api_points_at_the_base_url_path(
    fake: Any, response: httpx.Response, said: str
) -> None:
    fake.add(1)
    connector = connect(fake)
    if fake.kind == "airflow":
        connector.check()
    fake.inject(response)
    with pytest.raises(ConnectorError) as caught:
        drain(connector, None)
    if fake.kind == "prefect":  # Prefect's list is a POST
        said = said.replace("GET", "POST")
    assert said in str(caught.value) and "check the path in base_url" in str(caught.value)
    assert caught.value.stops_source


def test_airflow_logging_in_at_a_wrong_path_points_at_the_base_url_path() -> None:
    fake = FakeAirflow()
    fake.inject(httpx.Response(405, json={"detail": "Method Not Allowed"}))
    with pytest.raises(NoApi, match=r"does not allow POST .*check the path in base_url"):
        connect(fake, username="etl", password="pw-123").check()


def test_airflow_without_credentials_where_they_are_required_says_to_set_them() -> None:
    fake = FakeAirflow()
    fake.all_admins = False
    with pytest.raises(AuthFailed) as caught:
        connect(fake).check()
    message = str(caught.value)
    assert "this source has no credentials" in message
    assert "set username_env and password_env" in message
    assert "lack a permission" not in message


def test_airflow_credentials_without_a_permission_are_said_to_lack_it() -> None:
    fake = FakeAirflow()
    fake.all_admins = False
    connector = connect(fake, username="etl", password="pw-123")
    connector.check()
    fake.faults.extend([httpx.Response(403, json={"detail": "Forbidden"})] * 2)
    with pytest.raises(AuthFailed, match="the credentials lack a permission"):
        drain(connector, None)


def test_a_deletion_between_two_pages_skips_nothing_in_either_walk(fake: Any) -> None:
    made = fake.add(120)
    fake.before_list[2] = lambda: fake.delete(made[-60] if fake.kind == "n8n" else made[10])
    records, _ = drain(connect(fake, page_size=40), None)
    assert set(fake.ids()) <= {r.external_id for r in records}
    fake.requests.clear()
    fake.before_list[2] = lambda: fake.delete(made[-61] if fake.kind == "n8n" else made[11])
    present = {i for page in connect(fake, page_size=40).present_ids() for i in page}
    assert fake.ids() <= present


def test_an_airflow_position_stays_short_with_the_longest_names() -> None:
    fake = FakeAirflow()
    for name in fake.add(120):
        fake.record(name)["dag_run_id"] = "é" * (190 - len(name.split("/")[0]))
    for i, run in enumerate(fake.runs.values()):
        run["dag_run_id"] = f"{i:03d}" + run["dag_run_id"][3:]
    pages = list(connect(fake, page_size=40).pages(None))
    assert all(len(json.dumps({"c": p.position})) < 2000 for p in pages)
    records = [r.external_id for p in pages for r in p.records]
    assert sorted(records) == sorted(fake.ids())
