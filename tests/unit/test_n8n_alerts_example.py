"""The example n8n workflow is importable JSON wired to what the ledger sends."""

from __future__ import annotations

import json
from pathlib import Path

from flowledger.services.outbox import HoldAlert
from tests.support.builders import T0

WORKFLOW = Path(__file__).parents[2] / "flowledger" / "n8n" / "templates" / "alerts.json"


def test_the_alerts_workflow_is_a_connected_webhook_dedupe_slack_chain() -> None:
    flow = json.loads(WORKFLOW.read_text())
    nodes = {n["name"]: n for n in flow["nodes"]}
    assert [n["type"] for n in flow["nodes"]] == [
        "n8n-nodes-base.webhook",
        "n8n-nodes-base.removeDuplicates",
        "n8n-nodes-base.slack",
    ]
    for source, outputs in flow["connections"].items():
        assert source in nodes
        for branch in outputs["main"]:
            assert all(link["node"] in nodes for link in branch)
    assert nodes["flowledger alert"]["parameters"]["httpMethod"] == "POST"


def test_the_workflow_reads_fields_the_ledger_sends() -> None:
    text = WORKFLOW.read_text()
    body = HoldAlert(1, "unknown_outcome", True, "op", "e", "s", "d", T0, T0).body("hold:1:x")
    assert "$json.body.delivery_id" in text
    for field in ("reason", "blocking", "operation_id", "detail", "deadline", "refers_to"):
        assert f"$json.body.hold.{field}" in text and field in body["hold"]
    overdue = HoldAlert(2, "overdue", False, "op", None, None, "d", T0, T0, refers_to=1)
    assert f"'{overdue.kind}'" in text
