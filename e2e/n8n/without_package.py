"""``flowledger n8n setup`` against an n8n without the node package: the HTTP Request
templates."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import NODE_TYPE, Flow, once_then_skipped, op_id, open_holds, post, scenario_copy
from e2e.n8n.setup_runs import SETUP, setup_twice
from flowledger.n8n.setup import (
    HEADER_CREDENTIAL_TYPE,
    SETTINGS_NODE,
    TEMPLATES,
    credential_name,
    load_template,
)

# A workflow someone already has: its error workflow is set by ``setup --workflow``.
FAILING = {
    "name": "e2e: an existing workflow",
    "nodes": [
        {
            "id": "f0000000-0000-4000-8000-000000000001",
            "name": "Start",
            "type": "n8n-nodes-base.manualTrigger",
            "typeVersion": 1,
            "position": [0, 0],
            "parameters": {},
        }
    ],
    "connections": {},
    "settings": {"executionOrder": "v1", "saveManualExecutions": True},
}


def header_auth_ids(workflow: dict[str, Any]) -> set[str]:
    """The ids of the Header Auth credentials a workflow's nodes use."""
    return {
        str(ref.get("id"))
        for node in workflow.get("nodes", [])
        for kind, ref in (node.get("credentials") or {}).items()
        if kind == HEADER_CREDENTIAL_TYPE
    }


def without_package(
    check: Checks, tmp: Path, home: Path, node_dir: Path | None, target: Target
) -> None:
    """``flowledger n8n setup`` against a second n8n that has no node package: a Header Auth
    credential, the HTTP Request error workflow (active) and the no-install template, which,
    given its write URL, guards writes and reports a failed execution to the ledger."""
    plain = N8n(home, node_dir, tmp / "n8n-plain")
    plain.user_folder.mkdir()
    ledger = LocalLedger(tmp / "ledger-plain", plain)
    ledger.folder.mkdir()
    try:
        plain.start()
        plain.make_owner_and_key()
        print(f"      a second n8n, without the package, at {plain.url}", flush=True)
        check(
            "without the package: the node type is not there", NODE_TYPE not in plain.node_types()
        )
        ledger.start()
        setup_twice(check, "n8n setup without the package", ledger, installed=False)

        name = credential_name("local-n8n", False)
        creds = [c for c in plain.api("GET", "/credentials")["data"] if c["name"] == name]
        check(
            "without the package: one Header Auth credential",
            [c["type"] for c in creds] == [HEADER_CREDENTIAL_TYPE],
            f"{[(c['name'], c['type']) for c in creds]}",
        )
        workflows = {
            w["name"]: w for w in plain.api("GET", "/workflows", params={"limit": 250})["data"]
        }
        error_name, _ = load_template(TEMPLATES, False, "error")
        example_name, _ = load_template(TEMPLATES, False, "example")
        error_wf = workflows.get(error_name) or {}
        check(
            "without the package: the HTTP Request error workflow is active, on that credential",
            bool(error_wf.get("active"))
            and bool(creds)
            and header_auth_ids(error_wf) == {creds[0]["id"]},
            f"active {error_wf.get('active')}, credentials {header_auth_ids(error_wf)}",
        )

        # The imported template, given its write URL (and a webhook that answers when done).
        example = plain.api("GET", f"/workflows/{workflows[example_name]['id']}")
        settings_node = next(n for n in example["nodes"] if n["name"] == SETTINGS_NODE)
        values = {
            a["name"]: a["value"] for a in settings_node["parameters"]["assignments"]["assignments"]
        }
        check(
            "without the package: the template holds the ledger URL once, the credential, and "
            "the error workflow",
            example["settings"].get("errorWorkflow") == error_wf.get("id")
            and values.get("ledger_url") == ledger.url
            and values.get("source") == "local-n8n"
            and bool(creds)
            and header_auth_ids(example) == {creds[0]["id"]},
            f"errorWorkflow {example['settings'].get('errorWorkflow')}, "
            f"ledger_url {values.get('ledger_url')}, credentials {header_auth_ids(example)}",
        )
        given = scenario_copy(example, example_name, "e2e-plain", target.url)
        plain.api("PUT", f"/workflows/{example['id']}", json=given)
        plain.api("POST", f"/workflows/{example['id']}/activate")
        read_token = ledger.token("e2e-read", "read")
        once_then_skipped(
            check,
            "without the package: the imported template",
            Flow(plain, ledger, target, read_token, "e2e-plain"),
            {"invoice_id": "plain-1", "amount": 11},
        )

        # A failing execution (the target's answer has no id: the ledger refuses the empty
        # receipt) runs the error workflow, whose Header Auth call opens the hold.
        no_id = "noid-plain"
        post(plain, "e2e-plain", {"invoice_id": no_id, "amount": 1})
        op = wait_for(
            lambda: (o := ledger.operation(read_token, op_id(no_id))) and open_holds(o) and o, 30
        ) or ledger.operation(read_token, op_id(no_id))
        errors = wait_for(partial(plain.executions, str(error_wf.get("id")), None), 15) or []
        check(
            "without the package: a failed execution reaches the ledger through the error "
            "workflow and is held",
            target.writes[no_id] == 1
            and [h["reason"] for h in open_holds(op)] == ["execution_failed"]
            and any(e.get("status") == "success" for e in errors),
            f"holds {[h['reason'] for h in open_holds(op)]}, error workflow runs "
            f"{[e.get('status') for e in errors]}",
        )

        # An existing workflow gets the error workflow with --workflow; run twice, once set.
        failing = plain.create_workflow(FAILING, activate=False)
        linked = ledger.cli(*SETUP, ledger.url, "--workflow", failing)
        relinked = ledger.cli(*SETUP, ledger.url, "--workflow", failing)
        settings = plain.api("GET", f"/workflows/{failing}")["settings"]
        check(
            "without the package: setup --workflow sets the error workflow of an existing "
            "workflow, once",
            settings.get("errorWorkflow") == error_wf.get("id")
            and re.search(r"^updated\s+error workflow of", linked, re.MULTILINE) is not None
            and "updated" not in relinked
            and "created" not in linked + relinked,
            f"errorWorkflow {settings.get('errorWorkflow')}",
        )
    finally:
        plain.stop()
        ledger.stop()
