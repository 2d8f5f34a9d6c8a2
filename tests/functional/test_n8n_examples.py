"""The example n8n workflows: they parse, use real node types at versions n8n has, wire only
existing nodes, and send what the receiver accepts (checked against its own schemas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "n8n"
# Node types and the versions n8n-io/n8n's packages/nodes-base declares for them
# (HttpRequest/V3, If/V2, ErrorTrigger, NoOp, Webhook, RemoveDuplicates/V2, Slack/V2).
KNOWN: dict[str, set[float]] = {
    "n8n-nodes-base.httpRequest": {3, 4, 4.1, 4.2},
    "n8n-nodes-base.if": {2, 2.1, 2.2},
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
    assert {p.name for p in FILES} == {"guarded-write.json", "error-workflow.json", "alerts.json"}


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


def test_ledger_calls_use_a_header_auth_credential_and_no_literal_secret() -> None:
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        assert "flt_" not in text and "Bearer" not in text
        for node in load(path)["nodes"]:
            params = node["parameters"]
            if node["type"] == "n8n-nodes-base.httpRequest":
                assert params["authentication"] == "genericCredentialType"
                assert params["genericAuthType"] == "httpHeaderAuth"
                assert "httpHeaderAuth" in node["credentials"]
                if "{{" in params["url"]:
                    assert params["url"].startswith("=")


def test_guard_pattern_branches() -> None:
    workflow = load(EXAMPLES / "guarded-write.json")
    nodes = {n["name"]: n for n in workflow["nodes"]}
    body = nodes["Ledger: dispatch"]["parameters"]["jsonBody"]
    for needle in ("$execution.id", "$workflow.id", "$runIndex", "processing_version", "input"):
        assert needle in body
    go = nodes["Decision is go?"]["parameters"]["conditions"]["conditions"][0]
    assert go["leftValue"] == "={{ $json.decision }}" and go["rightValue"] == "go"
    wiring = workflow["connections"]
    assert wiring["Decision is go?"]["main"][0][0]["node"] == "Write to target (your API)"
    write = wiring["Write to target (your API)"]["main"]
    assert [write[0][0]["node"], write[1][0]["node"]] == ["Ledger: confirm", "Ledger: fail"]
    assert nodes["Write to target (your API)"]["onError"] == "continueErrorOutput"
    for harmless in ("Skip: already written", "Hold: a person decides"):
        assert nodes[harmless]["type"] == "n8n-nodes-base.noOp"
    assert "errorWorkflow" in workflow["settings"]


def test_error_workflow_sends_only_what_the_ledger_keeps() -> None:
    workflow = load(EXAMPLES / "error-workflow.json")
    hook = next(n for n in workflow["nodes"] if n["type"] == "n8n-nodes-base.httpRequest")
    assert hook["parameters"]["url"].endswith("/v1/hooks/n8n/error")
    body = hook["parameters"]["jsonBody"]
    assert "context" not in body and "stack" not in body
    for needle in ("execution", "lastNodeExecuted", "httpCode", "workflow"):
        assert needle in body
