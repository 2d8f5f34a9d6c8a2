"""``flowledger n8n setup`` against a fake of n8n's public API: a first run makes the token, the
credential and the error workflow; a second run makes nothing; each refusal is one line that
says what to do (a missing scope is named) and leaves no live token behind."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from flowledger.cli import n8n as n8n_cli
from flowledger.cli.common import app
from flowledger.n8n.setup import SetupFailed, SetupRequest, setup
from flowledger.receiver.api.tokens import list_tokens
from flowledger.storage.engine import open_store
from tests.support.cli import N8N_SOURCE, cli_workdir
from tests.support.fakes.n8n_setup import KEY, NODE_TYPE, ROUTES, FakeN8n

CONFIG = (
    N8N_SOURCE
    + """
[receiver]
port = 8788
"""
)


class Tokens:
    """The two token callables setup takes, recording what they did."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.revoked: list[str] = []

    def make(self, base: str) -> tuple[str, str]:
        name = base if base not in self.made else f"{base}-{len(self.made) + 1}"
        self.made.append(name)
        return name, f"flt_secret_{len(self.made)}"

    def revoke(self, name: str) -> None:
        self.revoked.append(name)


def request(**kw: Any) -> SetupRequest:
    base: dict[str, Any] = {
        "source": "prod-n8n",
        "n8n_url": "http://n8n.test",
        "api_key": KEY,
        "ledger_url": "http://ledger.internal:8787",
    }
    return SetupRequest(**(base | kw))


def run_setup(fake: FakeN8n, tokens: Tokens, **kw: Any) -> Any:
    with fake.client() as client:
        return setup(client, request(**kw), tokens.make, tokens.revoke)


def nodes_of(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in workflow["nodes"]}


# ------------------------------------------------------------------ with the node installed


def test_first_run_makes_token_credential_and_active_error_workflow() -> None:
    fake, tokens = FakeN8n(), Tokens()
    report = run_setup(fake, tokens)
    assert report.node_installed
    assert tokens.made == ["n8n-prod-n8n"] and tokens.revoked == []
    (cred,) = fake.credentials
    assert (cred["name"], cred["type"]) == ("Flowledger API (prod-n8n)", "flowledgerApi")
    assert cred["data"] == {
        "baseUrl": "http://ledger.internal:8787",
        "token": "flt_secret_1",
        "signingSecret": "",
        "source": "prod-n8n",
    }
    (error_wf,) = fake.workflows.values()
    assert error_wf["active"]
    report_node = nodes_of(error_wf)["Ledger: execution failed"]
    assert report_node["type"] == NODE_TYPE
    assert report_node["credentials"]["flowledgerApi"] == {
        "id": cred["id"],
        "name": "Flowledger API (prod-n8n)",
    }
    assert [(s.action, s.kind) for s in report.steps] == [
        ("created", "token"),
        ("created", "credential"),
        ("created", "workflow"),
        ("activated", "workflow"),
    ]
    assert f"http://n8n.test/workflow/{error_wf['id']}" in report.links


def test_second_run_creates_nothing_twice() -> None:
    fake, tokens = FakeN8n(), Tokens()
    run_setup(fake, tokens, with_example=True)
    before = (len(fake.credentials), len(fake.workflows), list(tokens.made))
    first_run = len(fake.requests)
    report = run_setup(fake, tokens, with_example=True)
    assert (len(fake.credentials), len(fake.workflows), tokens.made) == before
    assert {s.action for s in report.steps} == {"exists"}
    # Four reads, then the scope probes, each of an execution that cannot exist.
    again = fake.requests[first_run:]
    assert [m for m, _ in again[:4]] == ["GET"] * 4
    assert [(m, p) for m, p in again[4:]] == [
        ("PUT", "/api/v1/executions/0/tags"),
        ("POST", "/api/v1/executions/0/retry"),
        ("DELETE", "/api/v1/executions/0"),
    ]


def test_setup_names_the_scopes_the_key_lacks_for_pins_retries_and_deletions() -> None:
    fake, tokens = FakeN8n(), Tokens()
    assert run_setup(fake, tokens).scope_notes == []
    fake.scopes -= {"executionTags:update", "execution:delete"}
    assert run_setup(fake, tokens).scope_notes == [
        "the API key lacks the executionTags:update scope, needed for pinning a hold's "
        "execution against pruning: add it to the key in n8n (Settings → n8n API)",
        "the API key lacks the execution:delete scope, needed for sources delete-pinned: add "
        "it to the key in n8n (Settings → n8n API)",
    ]


def test_with_example_imports_the_node_template_linked_to_the_error_workflow() -> None:
    fake, tokens = FakeN8n(), Tokens()
    run_setup(fake, tokens, with_example=True)
    error_wf = fake.by_name("flowledger: report failed executions (Flowledger node)")
    example = fake.by_name("Send invoice (guarded by the Flowledger node)")
    assert example["settings"]["errorWorkflow"] == error_wf["id"]
    assert not example["active"]  # its write URL is a placeholder until a person sets it
    guard = nodes_of(example)["Guard: may we write?"]
    assert guard["credentials"]["flowledgerApi"]["id"] == fake.credentials[0]["id"]
    assert "REPLACE_WITH" not in json.dumps(example)


def test_workflow_option_sets_the_error_workflow_on_existing_workflows() -> None:
    fake, tokens = FakeN8n(), Tokens()
    fake.workflows["wf-7"] = {
        "id": "wf-7",
        "name": "billing",
        "active": True,
        "nodes": [],
        "connections": {},
        "settings": {"executionOrder": "v1"},
    }
    report = run_setup(fake, tokens, workflows=("wf-7",))
    error_id = fake.by_name("flowledger: report failed executions (Flowledger node)")["id"]
    assert fake.workflows["wf-7"]["settings"] == {"executionOrder": "v1", "errorWorkflow": error_id}
    assert ("updated", "error workflow of", "billing") in [
        (s.action, s.kind, s.name) for s in report.steps
    ]
    again = run_setup(fake, tokens, workflows=("wf-7",))
    assert ("exists", "error workflow of") in [(s.action, s.kind) for s in again.steps]


def test_an_unknown_workflow_id_is_one_line() -> None:
    with pytest.raises(SetupFailed, match="n8n has no workflow 'nope' \\(404\\)"):
        run_setup(FakeN8n(), Tokens(), workflows=("nope",))


# ------------------------------------------------------------------ without the node


def test_without_the_node_a_header_auth_credential_and_the_http_templates() -> None:
    fake, tokens = FakeN8n(installed=False), Tokens()
    report = run_setup(fake, tokens, with_example=True)
    assert not report.node_installed
    (cred,) = fake.credentials
    assert (cred["name"], cred["type"]) == ("flowledger write token (prod-n8n)", "httpHeaderAuth")
    assert cred["data"] == {"name": "Authorization", "value": "Bearer flt_secret_1"}
    error_wf = fake.by_name("flowledger: report failed executions")
    hook = nodes_of(error_wf)["Ledger: execution failed"]
    assert hook["parameters"]["url"] == "http://ledger.internal:8787/v1/hooks/n8n/error"
    example = fake.by_name("Send invoice (guarded by flowledger, HTTP Request nodes)")
    settings = nodes_of(example)["Ledger settings"]["parameters"]["assignments"]["assignments"]
    values = {a["name"]: a["value"] for a in settings}
    assert values["ledger_url"] == "http://ledger.internal:8787"
    assert values["source"] == "prod-n8n"
    text = json.dumps(example)
    assert "127.0.0.1:8787" not in text and "REPLACE_WITH" not in text
    (step,) = [s for s in report.steps if s.name == example["name"]]
    # What is left to do: the credential and the error workflow are already in it.
    assert step.note == "not active: set its write URL, then publish it (the credential is set)"


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("scope", "creates_token"),
    [
        ("credential:list", False),
        ("credential:create", True),
        ("workflow:list", False),
        ("workflow:create", False),
        ("workflow:activate", False),
    ],
)
def test_a_missing_scope_is_named_and_no_live_token_is_left(
    scope: str, creates_token: bool
) -> None:
    fake, tokens = FakeN8n(), Tokens()
    fake.scopes.discard(scope)
    with pytest.raises(SetupFailed) as failed:
        run_setup(fake, tokens)
    message = str(failed.value)
    assert f"lacks the {scope} scope (403)" in message and "\n" not in message
    if creates_token:
        assert tokens.revoked == tokens.made == ["n8n-prod-n8n"]
        assert "was revoked again" in message
    assert set(tokens.made) - set(tokens.revoked) <= (
        {"n8n-prod-n8n"} if not creates_token else set()
    )


def test_a_missing_read_or_update_scope_for_workflow_option_is_named() -> None:
    for scope in ("workflow:read", "workflow:update"):
        fake = FakeN8n()
        fake.workflows["wf-7"] = {"id": "wf-7", "name": "b", "active": True, "nodes": []}
        fake.scopes.discard(scope)
        with pytest.raises(SetupFailed, match=f"lacks the {scope} scope"):
            run_setup(fake, Tokens(), workflows=("wf-7",))


def test_a_wrong_key_is_401() -> None:
    with pytest.raises(SetupFailed, match=r"refused the API key \(401\)"):
        run_setup(FakeN8n(), Tokens(), api_key="wrong")


def test_no_key_says_where_to_put_one() -> None:
    with pytest.raises(SetupFailed, match="no n8n API key"):
        run_setup(FakeN8n(), Tokens(), api_key=None)


def test_n8n_still_starting_says_so() -> None:
    tokens = Tokens()
    with pytest.raises(SetupFailed, match="still starting; run this again shortly"):
        run_setup(FakeN8n(starting=True), tokens)
    assert tokens.made == []


def test_n8n_unreachable_says_so() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    with (
        httpx.Client(transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(
            SetupFailed, match=re.escape("n8n unreachable: cannot reach n8n at http://n8n.test")
        ),
    ):
        setup(client, request(), Tokens().make, Tokens().revoke)


def test_missing_templates_are_said_before_anything_is_made(tmp_path: Path) -> None:
    fake, tokens = FakeN8n(), Tokens()
    with (
        fake.client() as client,
        pytest.raises(SetupFailed, match="cannot read the template"),
    ):
        setup(client, request(), tokens.make, tokens.revoke, templates=tmp_path)
    assert tokens.made == [] and fake.credentials == []


# ------------------------------------------------------------------ the command


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeN8n, Path]:
    fake = FakeN8n()
    db = cli_workdir(tmp_path, monkeypatch, CONFIG, TEST_N8N_API_KEY=KEY)
    monkeypatch.setattr(n8n_cli, "client_factory", fake.client)
    return fake, db


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["n8n", "setup", *args])
    return result.exit_code, result.output


def test_the_command_prints_what_it_made_with_ids_and_links(cli: tuple[FakeN8n, Path]) -> None:
    fake, db = cli
    code, out = invoke("--source", "prod-n8n")
    assert code == 0, out
    assert "n8n will reach the ledger at http://127.0.0.1:8788" in out
    assert "--ledger-url http://host.docker.internal:8788" in out
    cred_id = fake.credentials[0]["id"]
    assert re.search(rf"created\s+credential\s+Flowledger API \(prod-n8n\)\s+{cred_id}", out)
    assert "open http://n8n.test/home/workflows" in out
    assert "flt_" not in out  # the token goes to n8n only
    store = open_store(str(db))
    try:
        assert [(t["name"], t["scope"]) for t in list_tokens(store)] == [("n8n-prod-n8n", "write")]
    finally:
        store.dispose()


def test_the_command_twice_makes_one_token(cli: tuple[FakeN8n, Path]) -> None:
    fake, db = cli
    assert (
        invoke("--source", "prod-n8n", "--ledger-url", "http://host.docker.internal:8788")[0] == 0
    )
    code, out = invoke("--source", "prod-n8n", "--ledger-url", "http://host.docker.internal:8788")
    assert code == 0, out
    assert "created" not in out
    assert fake.credentials[0]["data"]["baseUrl"] == "http://host.docker.internal:8788"
    store = open_store(str(db))
    try:
        assert len(list_tokens(store)) == 1
    finally:
        store.dispose()


def test_a_failure_is_one_line_and_exit_1(cli: tuple[FakeN8n, Path]) -> None:
    fake, db = cli
    fake.scopes.discard("credential:create")
    code, out = invoke("--source", "prod-n8n")
    assert code == 1
    last = out.strip().splitlines()[-1]
    assert last.startswith("flowledger: n8n setup: the n8n API key lacks the credential:create")
    store = open_store(str(db))
    try:
        (token,) = list_tokens(store)
        assert token["revoked_at"] is not None  # made, then revoked when n8n refused
    finally:
        store.dispose()


def test_a_failure_that_quotes_the_new_token_or_the_key_prints_neither(
    cli: tuple[FakeN8n, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def echoing(self: FakeN8n, request: httpx.Request, body: Any) -> httpx.Response:
        said = f"bad credential {json.dumps(body['data'])} for key {KEY.upper()}"
        return httpx.Response(400, json={"message": said})

    monkeypatch.setitem(ROUTES, ("POST", "/api/v1/credentials", "credential:create"), echoing)
    code, out = invoke("--source", "prod-n8n")
    assert code == 1 and "rejected the request (400)" in out, out
    assert "flt_" not in out and '"token": "[redacted]"' in out
    assert KEY.upper() not in out and KEY not in out


def test_an_unknown_source_or_a_bad_ledger_url_is_refused(cli: tuple[FakeN8n, Path]) -> None:
    code, out = invoke("--source", "nope")
    assert code == 3 and "no source named 'nope'" in out
    code, out = invoke("--source", "prod-n8n", "--ledger-url", "ledger:8787")
    assert code == 2 and "--ledger-url must be an http:// or https:// URL" in out
