"""The Prefect connector on answers recorded from a Prefect 3.9.1 server, and its walk while
the flow run list changes underneath it."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest

from flowledger.connectors import registry
from flowledger.connectors.base import AuthFailed, ExecutionRecord, Malformed, NoApi, Settings
from flowledger.connectors.prefect import PrefectConnector, execution_page
from tests.support.builders import T0
from tests.support.fakes.prefect import FLOWS, RECORDED, FakePrefect


def drain(connector: Any, position: str | None) -> tuple[list[ExecutionRecord], str | None]:
    records: list[ExecutionRecord] = []
    for page in connector.pages(position):
        records.extend(page.records)
        position = page.position
    return records, position


def recorded_server(*, date: str = "Sun, 06 Dec 2026 09:50:00 GMT") -> httpx.Client:
    """The recorded answers, as the server gave them."""

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"date": date}
        if request.url.path == "/api/flow_runs/filter":
            return httpx.Response(200, json=RECORDED, headers=headers)
        if request.url.path == "/api/flows/filter":
            return httpx.Response(200, json=FLOWS, headers=headers)
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_recorded_flow_runs_are_kept_field_by_field() -> None:
    connector = PrefectConnector(recorded_server(), Settings(base_url="http://prefect.test/api"))
    records, _ = drain(connector, None)
    by_name = {r.extra["name"]: r for r in records}
    plain, tagged, failed, retried = (
        by_name[n]
        for n in (
            "mega-cassowary",
            "calculating-mongoose",
            "celadon-bettong",
            "feathered-centipede",
        )
    )
    assert plain.external_id == "842d21aa-437d-454a-808e-807f73285e0d"
    assert (plain.status, plain.final, plain.workflow_name) == ("success", True, "send-invoice")
    assert plain.workflow_id == "88ebaaf5-bf3f-4c8d-a170-4fb56d38d299"
    assert plain.started_at is not None and plain.started_at.isoformat() == (
        "2026-12-06T09:45:04.457481+00:00"
    )
    assert plain.stopped_at is not None and plain.stopped_at.isoformat() == (
        "2026-12-06T09:45:04.590678+00:00"
    )
    assert plain.operation_id == "invoice:INV-1:send"  # the flow parameter
    assert plain.mode == "flow call"
    assert tagged.operation_id == "invoice:INV-2:send"  # the tag wins over the parameter
    assert (failed.status, failed.final, failed.workflow_name) == ("error", True, "always-fails")
    assert failed.extra["state_type"] == "FAILED" and failed.extra["state_name"] == "Failed"
    assert failed.operation_id is None
    assert (retried.status, retried.extra["run_count"], retried.workflow_name) == (
        "success",
        "2",
        "flaky",
    )


@pytest.mark.parametrize(
    ("state_type", "state_name", "status", "final"),
    [
        ("SCHEDULED", "Scheduled", "new", False),
        ("SCHEDULED", "Late", "new", False),
        ("SCHEDULED", "AwaitingRetry", "waiting", False),
        ("PENDING", "Pending", "new", False),
        ("RUNNING", "Retrying", "running", False),
        ("PAUSED", "Suspended", "waiting", False),
        ("CANCELLING", "Cancelling", "running", False),
        ("COMPLETED", "Cached", "success", True),
        ("FAILED", "TimedOut", "error", True),
        ("CRASHED", "Crashed", "crashed", True),
        ("CANCELLED", "Cancelled", "canceled", True),
        ("SOMETHING_NEW", "New", "unknown", False),
    ],
)
def test_each_state_maps_to_a_status_and_keeps_its_own_words(
    state_type: str, state_name: str, status: str, final: bool
) -> None:
    fake = FakePrefect()
    (run_id,) = fake.add(1)
    fake.runs[run_id]["state_type"], fake.runs[run_id]["state_name"] = state_type, state_name
    record = registry.build("prefect", fake.client(), fake.settings()).fetch(run_id)
    assert record is not None and (record.status, record.final) == (status, final)
    assert (record.extra["state_type"], record.extra["state_name"]) == (state_type, state_name)


def test_deletions_and_additions_between_pages_miss_nothing_and_double_nothing() -> None:
    fake = FakePrefect()
    made = fake.add(100)
    late: list[str] = []
    fake.before_list[2] = lambda: fake.prune(30)  # all behind the walk
    fake.before_list[3] = lambda: late.extend(fake.add(5))  # created while it walks
    fake.before_list[4] = lambda: fake.delete(made[95])  # ahead of the walk
    records, position = drain(
        registry.build("prefect", fake.client(), fake.settings(page_size=20)), None
    )
    ids = [r.external_id for r in records]
    assert len(ids) == len(set(ids))  # 0 doubled
    assert set(made[:20]) <= set(ids) and made[95] not in ids
    assert set(made[30:95]) | set(made[96:]) <= set(ids)  # 0 missed
    more, _ = drain(registry.build("prefect", fake.client(), fake.settings(page_size=20)), position)
    assert set(late) <= set(ids) | {r.external_id for r in more}
    assert not set(ids) & {r.external_id for r in more} - set(late)


def test_more_runs_at_one_time_than_a_page_holds_are_each_read_once() -> None:
    fake = FakePrefect()
    fake.add(2)
    same = fake.add(11, at=T0 + timedelta(minutes=30))
    fake.add(2, at=T0 + timedelta(minutes=31))
    fake.now = T0 + timedelta(hours=1)
    records, _ = drain(registry.build("prefect", fake.client(), fake.settings(page_size=4)), None)
    ids = [r.external_id for r in records]
    assert len(ids) == len(set(ids)) == 15 and set(same) <= set(ids)


def test_runs_scheduled_in_the_future_end_the_walk_and_are_read_once_their_time_comes() -> None:
    fake = FakePrefect()
    now = fake.add(3)
    future = fake.add(2, at=T0 + timedelta(hours=5), status="new")
    records, position = drain(registry.build("prefect", fake.client(), fake.settings()), None)
    assert {r.external_id for r in records} == set(now)
    fake.now = T0 + timedelta(hours=6)
    later, _ = drain(registry.build("prefect", fake.client(), fake.settings()), position)
    assert {r.external_id for r in later} == set(future)


def test_a_server_with_an_auth_string_is_asked_with_basic_credentials() -> None:
    fake = FakePrefect()
    fake.auth = ("admin", "pass-123")
    fake.add(2)
    assert "2 flow run(s)" in registry.build("prefect", fake.client(), fake.settings()).check()
    sent = fake.requests[-1].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"admin:pass-123").decode()


def test_without_credentials_a_401_says_which_settings_to_set() -> None:
    fake = FakePrefect()
    fake.auth = ("admin", "pass-123")
    connector = registry.build("prefect", fake.client(), FakePrefect().settings())
    with pytest.raises(AuthFailed, match=r"set api_key_env .* or username_env and password_env"):
        connector.check()


def test_a_cloud_key_is_sent_as_a_bearer_token() -> None:
    fake = FakePrefect()
    fake.add(1)
    registry.build("prefect", fake.client(), fake.settings(api_key="pnu_key")).check()
    assert fake.requests[-1].headers["authorization"] == "Bearer pnu_key"


@pytest.mark.parametrize(
    ("answer", "error", "said"),
    [
        (httpx.Response(404, json={"detail": "Not Found"}), NoApi, "not the Prefect API there"),
        (httpx.Response(200, json={"status": "ok"}), Malformed, "not like the Prefect API"),
    ],
)
def test_check_says_when_what_answers_is_not_prefect(
    answer: httpx.Response, error: type, said: str
) -> None:
    fake = FakePrefect()
    fake.inject(answer)
    with pytest.raises(error, match=said):
        registry.build("prefect", fake.client(), fake.settings()).check()


def test_a_limit_over_200_is_never_asked_for() -> None:
    fake = FakePrefect()
    fake.add(3)
    drain(registry.build("prefect", fake.client(), fake.settings(page_size=1000)), None)
    assert {json.loads(r.content)["limit"] for r in fake.list_requests()} == {200}


@pytest.mark.parametrize(
    ("base_url", "page"),
    [
        ("http://127.0.0.1:4200/api", "http://127.0.0.1:4200/runs/flow-run/RUN"),
        (
            "https://api.prefect.cloud/api/accounts/A1/workspaces/W1",
            "https://app.prefect.cloud/account/A1/workspace/W1/runs/flow-run/RUN",
        ),
        ("http://prefect.internal/elsewhere", None),
    ],
)
def test_a_flow_run_links_to_its_page_in_prefects_ui(base_url: str, page: str | None) -> None:
    assert execution_page(base_url, None, "RUN") == page
