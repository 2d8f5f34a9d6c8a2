"""A template's workflow made into a scenario, and the calls every scenario makes: post to its
webhook, read the operation and n8n's execution, write once then skip."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import httpx

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for

NODE_TYPE = "n8n-nodes-flowledger.flowledger"
WRITE = "Write to target (your API)"
WEBHOOK = "Invoice to send"


def scenario_copy(
    workflow: dict[str, Any], name: str, path: str, target_url: str
) -> dict[str, Any]:
    """The template's workflow, writing to ``target_url`` and answering its webhook when the
    execution ends (so a caller sees the outcome); nothing else changed."""
    wf = copy.deepcopy({k: workflow[k] for k in ("name", "nodes", "connections", "settings")})
    wf["name"] = name
    for node in wf["nodes"]:
        if node["name"] == WEBHOOK:
            node["parameters"].update(path=path, responseMode="lastNode")
            node["webhookId"] = path
        if node["name"] == WRITE:
            node["parameters"]["url"] = target_url
            node["parameters"]["options"]["timeout"] = 120_000  # the crash comes first
    return wf


def post(n8n: N8n, path: str, body: dict[str, Any], timeout: float = 60.0) -> httpx.Response:
    with n8n.client() as c:  # a 503 is n8n not ready to take it, before any node ran
        return c.post(f"/webhook/{path}", json=body, timeout=timeout)


def op_id(invoice: str) -> str:
    return f"invoice:{invoice}:send"


def operation_ids(ledger: LocalLedger, token: str) -> list[str]:
    """Every operation id the ledger holds, page by page."""
    ids: list[str] = []
    after: str | None = None
    while True:
        params = {"limit": "500", **({"after": after} if after is not None else {})}
        page = httpx.get(
            f"{ledger.url}/v1/operations",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ).json()
        ids += [str(row["operation_id"]) for row in page["items"]]
        after = page["next_after"]
        if after is None:
            return ids


def open_holds(op: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [h for h in (op or {}).get("holds", []) if h.get("resolved_at") is None]


def execution_error(n8n: N8n, execution_id: str) -> str | None:
    """The message of the error that ended an execution, as n8n shows it."""
    execution = n8n.api("GET", f"/executions/{execution_id}", params={"includeData": "true"})
    error = (((execution or {}).get("data") or {}).get("resultData") or {}).get("error") or {}
    message = error.get("message")
    return str(message) if message is not None else None


def finished(n8n: N8n, execution_id: str) -> dict[str, Any] | None:
    execution = n8n.api("GET", f"/executions/{execution_id}")
    return execution if execution.get("stoppedAt") else None


@dataclass(frozen=True)
class Flow:
    """A workflow reached at ``/webhook/<path>`` of ``n8n``, guarded by ``ledger``."""

    n8n: N8n
    ledger: LocalLedger
    target: Target
    read_token: str
    path: str


def once_then_skipped(check: Checks, label: str, flow: Flow, body: dict[str, Any]) -> None:
    """The invoice is written once and confirmed; sent again, it is skipped."""
    invoice = str(body["invoice_id"])
    first = wait_for(
        lambda: (a := post(flow.n8n, flow.path, body)).status_code != 404 and a, 10
    )  # a workflow just activated may answer 404 for a moment
    op = flow.ledger.operation(flow.read_token, op_id(invoice))
    state = op["operation"]["state"] if op else None
    check(
        f"{label}: written once, confirmed",
        bool(first) and flow.target.writes[invoice] == 1 and state == "confirmed",
        f"webhook {first.status_code if first else 404}, writes {flow.target.writes[invoice]}, "
        f"operation {state}",
    )
    again = post(flow.n8n, flow.path, body)
    check(
        f"{label}: the same invoice again is skipped, not written",
        '"skip"' in again.text and flow.target.requests[invoice] == 1,
        f"webhook {again.status_code}, requests to the target {flow.target.requests[invoice]}",
    )
