"""The example n8n workflows: they parse, use real node types at versions n8n has (or the
Flowledger node's), wire only existing nodes, name the ledger's URL once, read the write's
error output as n8n really shapes it, and stop visibly on a hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flowledger.n8n.setup import (
    CREDENTIAL_PLACEHOLDER,
    ERROR_WORKFLOW_PLACEHOLDER,
    TEMPLATE_LEDGER_URL,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "flowledger" / "n8n" / "templates"
# Node types and the versions n8n-io/n8n's packages/nodes-base declares for them
# (HttpRequest/V3, If/V2, ErrorTrigger, NoOp, Webhook, RemoveDuplicates/V2, Slack/V2, Set/V2,
# Switch/V3, StopAndError), and the Flowledger node of integrations/n8n.
NODE = "n8n-nodes-flowledger.flowledger"
KNOWN: dict[str, set[float]] = {
    "n8n-nodes-base.httpRequest": {3, 4, 4.1, 4.2},
    "n8n-nodes-base.if": {2, 2.1, 2.2},
    "n8n-nodes-base.set": {3.3, 3.4},
    "n8n-nodes-base.switch": {3, 3.1, 3.2},
    "n8n-nodes-base.stopAndError": {1},
    NODE: {1},
    "n8n-nodes-base.errorTrigger": {1},
    "n8n-nodes-base.noOp": {1},
    "n8n-nodes-base.webhook": {1, 1.1, 2},
    "n8n-nodes-base.removeDuplicates": {1, 1.1, 2},
    "n8n-nodes-base.slack": {2, 2.1, 2.2, 2.3},
}
FILES = sorted(EXAMPLES.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_there_are_examples() -> None:
    assert {p.name for p in FILES} == {
        "guarded-write.json",
        "guarded-write-node.json",
        "error-workflow.json",
        "error-workflow-node.json",
        "alerts.json",
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_nodes_are_real_n8n_types_and_connections_name_existing_nodes(path: Path) -> None:
    workflow = load(path)
    names = [n["name"] for n in workflow["nodes"]]
    assert len(names) == len(set(names))
    assert len({n["id"] for n in workflow["nodes"]}) == len(names)
    for node in workflow["nodes"]:
        assert node["type"] in KNOWN, node["type"]
        assert node["typeVersion"] in KNOWN[node["type"]]
        assert isinstance(node["parameters"], dict)
        assert len(node["position"]) == 2
    for source, outputs in workflow["connections"].items():
        assert source in names
        for branch in outputs["main"]:
            for link in branch:
                assert link["node"] in names and link["type"] == "main"
    linked = {
        link["node"] for o in workflow["connections"].values() for b in o["main"] for link in b
    }
    triggers = {n["name"] for n in workflow["nodes"] if n["type"].endswith(("Trigger", "webhook"))}
    assert set(names) == linked | triggers  # no node left unwired


def _ledger_calls(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        n
        for n in workflow["nodes"]
        if n["type"] == NODE
        or (n["type"] == "n8n-nodes-base.httpRequest" and "/v1/" in n["parameters"]["url"])
    ]


def test_ledger_calls_use_a_credential_placeholder_and_no_literal_secret() -> None:
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        assert "flt_" not in text and "Bearer" not in text
        for node in _ledger_calls(load(path)):
            params = node["parameters"]
            if node["type"] == NODE:
                assert node["credentials"]["flowledgerApi"]["id"] == CREDENTIAL_PLACEHOLDER
                continue
            assert params["authentication"] == "genericCredentialType"
            assert params["genericAuthType"] == "httpHeaderAuth"
            assert node["credentials"]["httpHeaderAuth"]["id"] == CREDENTIAL_PLACEHOLDER
            if "{{" in params["url"]:
                assert params["url"].startswith("=")


@pytest.mark.parametrize("name", ["guarded-write.json", "error-workflow.json"])
def test_the_ledger_url_is_written_once_per_template(name: str) -> None:
    text = (EXAMPLES / name).read_text(encoding="utf-8")
    assert text.count(TEMPLATE_LEDGER_URL) == 1


def test_the_node_templates_name_no_url_of_the_ledger() -> None:
    for name in ("guarded-write-node.json", "error-workflow-node.json"):
        assert TEMPLATE_LEDGER_URL not in (EXAMPLES / name).read_text(encoding="utf-8")


def test_http_guard_branches_and_reads_the_error_output_as_n8n_shapes_it() -> None:
    workflow = load(EXAMPLES / "guarded-write.json")
    nodes = {n["name"]: n for n in workflow["nodes"]}
    body = nodes["Ledger: dispatch"]["parameters"]["jsonBody"]
    for needle in ("$execution.id", "$workflow.id", "$runIndex", "processing_version", "input"):
        assert needle in body
    rules = nodes["Decision"]["parameters"]["rules"]["values"]
    assert [r["conditions"]["conditions"][0]["rightValue"] for r in rules] == ["go", "skip", "hold"]
    assert nodes["Decision"]["parameters"]["options"]["fallbackOutput"] == 2  # else: Hold
    wiring = workflow["connections"]
    go, skip, hold = wiring["Decision"]["main"]
    assert [go[0]["node"], skip[0]["node"], hold[0]["node"]] == [
        "Write to target (your API)",
        "Skip: already written",
        "Hold: a person decides",
    ]
    assert nodes["Hold: a person decides"]["type"] == "n8n-nodes-base.stopAndError"
    assert "$json.reason" in nodes["Hold: a person decides"]["parameters"]["errorMessage"]
    write = wiring["Write to target (your API)"]["main"]
    assert [write[0][0]["node"], write[1][0]["node"]] == ["Ledger: confirm", "Ledger: fail"]
    assert nodes["Write to target (your API)"]["onError"] == "continueErrorOutput"
    fail = nodes["Ledger: fail"]["parameters"]["jsonBody"]
    assert "$json.error?.status" in fail and "$json.error?.httpCode" in fail
    assert "408" in fail and "429" in fail
    confirm = nodes["Ledger: confirm"]["parameters"]["jsonBody"]
    assert "String($json.id ?? '')" in confirm  # missing: '' which the ledger refuses
    assert workflow["settings"]["errorWorkflow"] == ERROR_WORKFLOW_PLACEHOLDER


def test_http_guard_checks_the_field_its_operation_id_is_built_from_before_dispatch() -> None:
    workflow = load(EXAMPLES / "guarded-write.json")
    nodes = {n["name"]: n for n in workflow["nodes"]}
    wiring = workflow["connections"]
    assert wiring["Ledger settings"]["main"][0][0]["node"] == "Has an invoice id?"
    present, missing = wiring["Has an invoice id?"]["main"]
    assert [present[0]["node"], missing[0]["node"]] == ["Ledger: dispatch", "Missing invoice_id"]
    (condition,) = nodes["Has an invoice id?"]["parameters"]["conditions"]["conditions"]
    assert "body.invoice_id" in condition["leftValue"]
    assert condition["operator"]["operation"] == "notEmpty"
    assert "body.invoice_id" in nodes["Ledger: dispatch"]["parameters"]["url"]
    stop = nodes["Missing invoice_id"]
    assert stop["type"] == "n8n-nodes-base.stopAndError"
    assert stop["parameters"]["errorMessage"].startswith("invoice_id is missing")


def test_node_guard_has_three_outputs_and_stops_on_hold() -> None:
    workflow = load(EXAMPLES / "guarded-write-node.json")
    nodes = {n["name"]: n for n in workflow["nodes"]}
    guard = nodes["Guard: may we write?"]["parameters"]
    assert guard["operation"] == "guard" and guard["onHold"] == "stop"
    go, skip, hold = workflow["connections"]["Guard: may we write?"]["main"]
    assert go[0]["node"] == "Write to target (your API)"
    assert skip[0]["node"] == "Skip: already written"
    assert hold == []
    write = workflow["connections"]["Write to target (your API)"]["main"]
    assert [write[0][0]["node"], write[1][0]["node"]] == ["Ledger: confirm", "Ledger: fail"]
    assert nodes["Ledger: fail"]["parameters"]["outcome"] == "auto"
    confirm = nodes["Ledger: confirm"]["parameters"]
    assert (confirm["receiptSource"], confirm["receiptField"]) == ("field", "id")
    # Confirm and Fail take the Guard's operation in the node: n8n 2.x evaluates each
    # expression in an isolate, so the template spends one, on the Guard's operation id.
    assert "operationId" not in confirm and "operationId" not in nodes["Ledger: fail"]["parameters"]
    spent = [
        (name, key)
        for name, node in nodes.items()
        if node["type"] == "n8n-nodes-flowledger.flowledger"
        for key, value in node["parameters"].items()
        if isinstance(value, str) and value.startswith("=")
    ]
    assert spent == [("Guard: may we write?", "operationId")]
    assert workflow["settings"]["errorWorkflow"] == ERROR_WORKFLOW_PLACEHOLDER


@pytest.mark.parametrize("name", ["error-workflow.json", "error-workflow-node.json"])
def test_error_workflows_send_only_what_the_ledger_keeps(name: str) -> None:
    workflow = load(EXAMPLES / name)
    call = _ledger_calls(workflow)[0]
    if call["type"] == NODE:
        assert call["parameters"]["operation"] == "reportFailedExecution"
        return
    assert call["parameters"]["url"].endswith("/v1/hooks/n8n/error")
    body = call["parameters"]["jsonBody"]
    assert "context" not in body and "stack" not in body
    for needle in ("execution", "lastNodeExecuted", "httpCode", "workflow"):
        assert needle in body
