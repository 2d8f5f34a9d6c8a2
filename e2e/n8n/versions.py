"""Stale workflow versions through a real n8n: an execution of a workflow that waits starts on
its first version, the workflow is published again with a PUT (n8n re-publishes an active
workflow at once) while it waits, and it dispatches after; one sync later the ledger holds one
``stale_workflow_version`` hold naming both versions."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import WEBHOOK, op_id, post, scenario_copy

PATH = "e2e-version"
WAIT = "Wait before the write"
WAIT_SECONDS = 6  # long enough for the PUT to land while the execution waits


def stale_version(
    check: Checks, n8n: N8n, ledger: LocalLedger, target: Target, node_example: dict[str, Any]
) -> None:
    workflow = _waiting(scenario_copy(node_example, "e2e: version wait", PATH, target.url))
    workflow_id = n8n.create_workflow(workflow, activate=True)
    first = n8n.api("GET", f"/workflows/{workflow_id}")["activeVersionId"]
    invoice = "version-1"
    call = threading.Thread(target=post, args=(n8n, PATH, {"invoice_id": invoice, "amount": 3}))
    wait_for(lambda: post(n8n, PATH, {"invoice_id": "version-0", "amount": 1}).status_code != 404)
    call.start()
    running = wait_for(lambda: _waiting_executions(n8n, workflow_id), 20) or []
    # The PUT publishes the changed workflow at once, while the execution waits.
    changed = copy.deepcopy(workflow)
    for node in changed["nodes"]:
        if node["name"] == WAIT:
            node["notes"] = "changed while an execution waits"
    n8n.api("PUT", f"/workflows/{workflow_id}", json=changed)
    second = n8n.api("GET", f"/workflows/{workflow_id}")["activeVersionId"]
    call.join(timeout=120)
    out = ledger.cli("sync", "--once")
    holds = [
        h
        for h in json.loads(ledger.cli("holds", "--reason", "stale_workflow_version", "--json"))
        if f"workflow {workflow_id} " in h["detail"]
    ]
    detail = holds[0]["detail"] if holds else ""
    execution = str(running[0]["id"]) if running else "?"
    check(
        "an execution that waited across a re-publish (PUT) and then dispatched: one "
        "stale_workflow_version hold naming both versions",
        len(holds) == 1
        and first != second
        and f"ran version {first}" in detail
        and f"while {second} was active" in detail
        and f"execution {execution} " in detail
        and op_id(invoice) in detail
        and target.writes[invoice] == 1,
        f"versions {first} -> {second}, execution {execution}, writes {target.writes[invoice]}, "
        f"holds {[h['detail'] for h in holds]}; sync: {out.strip()[-300:]}",
    )
    if holds:
        print(f"      hold {holds[0]['id']}: {detail}", flush=True)


def _waiting(workflow: dict[str, Any]) -> dict[str, Any]:
    """The workflow with a Wait node between its webhook and what followed it."""
    wf = copy.deepcopy(workflow)
    after = wf["connections"][WEBHOOK]
    x, y = next(n["position"] for n in wf["nodes"] if n["name"] == WEBHOOK)
    wf["nodes"].append(
        {
            "name": WAIT,
            "type": "n8n-nodes-base.wait",
            "typeVersion": 1.1,
            "position": [x + 100, y + 200],
            "parameters": {"resume": "timeInterval", "amount": WAIT_SECONDS, "unit": "seconds"},
        }
    )
    wf["connections"][WAIT] = after
    wf["connections"][WEBHOOK] = {"main": [[{"node": WAIT, "type": "main", "index": 0}]]}
    return wf


def _waiting_executions(n8n: N8n, workflow_id: str) -> list[dict[str, Any]]:
    """The workflow's executions under way (a short Wait keeps one ``running``)."""
    return n8n.executions(workflow_id, "running") + n8n.executions(workflow_id, "waiting")
