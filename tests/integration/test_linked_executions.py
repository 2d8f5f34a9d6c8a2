"""An operation's linked executions, as every reader lists them (on SQLite and PostgreSQL):
the execution that dispatched and the retry of it that n8n ran after it crashed, each once,
with how it is linked, in ``show`` (text and JSON), the API's operation detail and the
terminal UI's operation screen; an execution linked two ways is listed once."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static
from typer.testing import CliRunner

from flowledger.cli import app as cli_app
from flowledger.config import SourceConfig
from flowledger.domain import FailOutcome
from flowledger.receiver.api.schemas import LinkedExecutionPublic
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.execution_copies import LINKED_VIA
from flowledger.sync import sync_source
from flowledger.tui import make_app
from flowledger.tui.screens.operation import OperationScreen
from tests.support.builders import FakeClock, req
from tests.support.fakes.n8n import KEY, FakeN8n
from tests.support.receiver import SECRET, Api, make_token, receiver_config, running
from tests.support.tui import settle

ENV = "TEST_N8N_API_KEY"
OP = "invoice:INV-9:send"


@pytest.fixture
def n8n(monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    monkeypatch.setenv(ENV, KEY)
    return FakeN8n()


def sync(ledger: Ledger, fake: FakeN8n) -> Any:
    cfg = SourceConfig(name="prod-n8n", kind="n8n", base_url=FakeN8n.base_url, api_key_env=ENV)
    return sync_source(ledger, cfg, fake.client(), sleep=lambda _: None)


@pytest.fixture
def retried(ledger: Ledger, n8n: FakeN8n) -> tuple[str, str]:
    """Execution ``crashed`` dispatched the operation and crashed; n8n's retry of it ran,
    never dispatching. Both synced: the crash linked by its attempt, the retry by retryOf."""
    (crashed,) = n8n.add(1, status="crashed")
    ledger.dispatch(OP, req(crashed)).run("token:n8n")
    (retry,) = n8n.add(1, mode="retry", retry_of=crashed)
    assert sync(ledger, n8n).linked == 2
    return crashed, retry


@pytest.fixture
def api(ledger: Ledger) -> Iterator[Api]:
    tokens = {"read": make_token(ledger, "read", "read")}
    app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with running(app, ledger, tokens) as client:
        yield client


def linked(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["external_id"], e["linked_via"]) for e in rows]


def test_show_lists_a_crashed_execution_and_its_retry_once_each(
    ledger: Ledger, db_url: str, retried: tuple[str, str]
) -> None:
    crashed, retry = retried
    result = CliRunner().invoke(cli_app, ["show", OP, "--db", db_url, "--json"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert linked(shown["executions"]) == [(crashed, "attempt"), (retry, "retry_of")]
    assert [e["status"] for e in shown["executions"]] == ["crashed", "success"]
    assert shown["executions"][1]["retry_of"] == crashed

    result = CliRunner().invoke(cli_app, ["show", OP, "--db", db_url])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    executions = text[text.index("executions:") : text.index("events:")].splitlines()[1:]
    assert [line.split()[:4] for line in executions] == [
        [f"prod-n8n/{crashed}", "crashed", "via", "attempt"],
        [f"prod-n8n/{retry}", "success", "via", "retry_of"],
    ]


def test_the_api_detail_lists_them_with_how_each_is_linked(
    api: Api, retried: tuple[str, str]
) -> None:
    crashed, retry = retried
    answer = api.get(f"/v1/operations/{OP}")
    assert answer.status_code == 200
    assert linked(answer.json()["executions"]) == [(crashed, "attempt"), (retry, "retry_of")]
    schema = api.get("/openapi.json").json()["components"]["schemas"]
    assert "executions" in schema["OperationDetailPublic"]["required"]
    assert "linked_via" in schema["LinkedExecutionPublic"]["required"]


def test_the_public_model_names_every_way_of_linking() -> None:
    field = LinkedExecutionPublic.model_fields["linked_via"]
    assert field.annotation is not None
    assert tuple(field.annotation.__args__) == LINKED_VIA


def _plain(renderable: Any) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def test_the_operation_screen_lists_them_with_how_each_is_linked(
    ledger: Ledger, clock: FakeClock, tmp_path: Path, retried: tuple[str, str]
) -> None:
    crashed, retry = retried
    app = make_app(ledger, operator="dave", clock=clock, report_dir=tmp_path, refresh_seconds=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.push_screen(OperationScreen(app.ctx, OP))
        await settle(pilot)
        shown = _plain(app.screen.query_one("#op-executions", Static).content)
    rows = [line.split() for line in shown.splitlines() if "prod-n8n" in line]
    assert [r[:6] for r in rows] == [
        ["prod-n8n", "│", crashed, "│", "attempt", "│"],
        ["prod-n8n", "│", retry, "│", "retry_of", "│"],
    ]
    assert "via" in shown


def test_an_execution_linked_two_ways_is_listed_once(
    ledger: Ledger, n8n: FakeN8n, retried: tuple[str, str]
) -> None:
    """The retry, linked by retryOf, then dispatches the operation itself (attempt 2): it is
    listed once, by its attempt."""
    crashed, retry = retried
    ledger.fail(OP, FailOutcome.REJECTED, "crashed", execution_id=crashed).run("token:n8n")
    assert ledger.dispatch(OP, req(retry)).run("token:n8n").attempt == 2
    assert sync(ledger, n8n).linked == 0  # each link is written once
    detail = queries.operation_detail(ledger.store, OP)
    assert detail is not None
    assert linked(detail.executions) == [(crashed, "attempt"), (retry, "attempt")]
    via = [
        e["data"]["via"]
        for e in detail.events
        if e["kind"] == "execution_linked" and e["data"]["execution_id"] == retry
    ]
    assert via == ["retry_of"]


def test_an_operation_without_linked_executions_lists_none(ledger: Ledger) -> None:
    ledger.dispatch(OP, req("never-synced")).run("token:n8n")
    detail = queries.operation_detail(ledger.store, OP)
    assert detail is not None and detail.executions == []
