"""Batches through the node's Guard: one webhook call carries several invoices, a Split Out
node makes them items, and one of them is held. With *On Hold* set to stop, n8n passes none of
the Guard's items on, so the Guard releases those it was let through for: none may be left
``dispatching`` without a write, nor held for a person without a cause. With *On Hold* set to
continue, those are written once each and the held one takes the Hold output."""

from __future__ import annotations

import copy
from typing import Any

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import NODE_TYPE, WEBHOOK, execution_error, op_id, open_holds, post

SPLIT = "One item per invoice"


def batch_copy(workflow: dict[str, Any], name: str, path: str, on_hold: str) -> dict[str, Any]:
    """The node scenario's workflow (see ``scenario_copy``) taking ``{"invoices": [...]}``: a
    Split Out node between the webhook and the Guard, the Guard reading each item's own
    ``invoice_id``, and the write sending the item."""
    wf = copy.deepcopy(workflow)
    wf["name"] = name
    webhook = next(n for n in wf["nodes"] if n["name"] == WEBHOOK)
    webhook["parameters"]["path"] = path
    webhook["webhookId"] = path
    guard = next(
        n for n in wf["nodes"] if n["type"] == NODE_TYPE and n["parameters"]["operation"] == "guard"
    )
    guard["parameters"].update(
        operationId="={{ 'invoice:' + $json.invoice_id + ':send' }}",
        inputSource="fields",
        inputFields="invoice_id, amount",
        onHold=on_hold,
    )
    for node in wf["nodes"]:
        if node["type"] == "n8n-nodes-base.httpRequest":
            node["parameters"]["jsonBody"] = (
                "={{ JSON.stringify({ invoice_id: $json.invoice_id, amount: $json.amount }) }}"
            )
    x, y = webhook["position"]
    wf["nodes"].append(
        {
            "name": SPLIT,
            "type": "n8n-nodes-base.splitOut",
            "typeVersion": 1,
            "position": [x + 100, y + 120],
            "parameters": {"fieldToSplitOut": "body.invoices", "options": {}},
        }
    )
    wf["connections"][SPLIT] = wf["connections"].pop(WEBHOOK)
    wf["connections"][WEBHOOK] = {"main": [[{"node": SPLIT, "type": "main", "index": 0}]]}
    return wf


def batches(
    check: Checks,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    node_workflow: dict[str, Any],
) -> None:
    """``[M1, A0 changed since it was written, M2]`` through each *On Hold* mode."""
    error_workflow = str(node_workflow["settings"]["errorWorkflow"])
    stop = n8n.create_workflow(
        batch_copy(node_workflow, "e2e: node batch, stop", "e2e-batch-stop", "stop"),
        activate=True,
    )
    carry_on = n8n.create_workflow(
        batch_copy(node_workflow, "e2e: node batch, continue", "e2e-batch-on", "output"),
        activate=True,
    )
    a0, m1, m2 = "batch-A0", "batch-M1", "batch-M2"
    first = wait_for(
        lambda: (a := post(n8n, "e2e-batch-stop", {"invoices": [{"invoice_id": a0, "amount": 1}]}))
        .status_code != 404 and a,
        10,
    )  # fmt: skip
    check(
        "node batch: a batch of one is written once",
        bool(first) and target.writes[a0] == 1,
        f"writes {target.writes[a0]}",
    )

    mixed = {
        "invoices": [
            {"invoice_id": m1, "amount": 10},
            {"invoice_id": a0, "amount": 999},  # its input changed: held
            {"invoice_id": m2, "amount": 20},
        ]
    }
    errors_before = len(n8n.executions(stop, "error"))
    reported_before = len(n8n.executions(error_workflow))
    post(n8n, "e2e-batch-stop", mixed)
    errored = wait_for(
        lambda: (e := n8n.executions(stop, "error")) and len(e) > errors_before and e, 20
    )
    # The error workflow runs for the failed execution; what it reports must hold nothing.
    reported = wait_for(
        lambda: (
            len(n8n.executions(error_workflow)) > reported_before
            and all(e.get("stoppedAt") for e in n8n.executions(error_workflow))
        ),
        30,
    )
    shown = execution_error(n8n, str(errored[0]["id"])) if errored else None
    states, holds, attempts = _seen(ledger, read_token, (m1, m2, a0))
    check(
        "node batch, On Hold stop: the execution stops naming the held item",
        shown == f"flowledger holds {op_id(a0)}: input_mismatch",
        f"n8n lists the execution as error: {shown!r}",
    )
    check(
        "node batch, On Hold stop: the items let through are released, not written, not held",
        states[m1] == states[m2] == "prepared"
        and holds[m1] == holds[m2] == []
        and attempts[m1] == attempts[m2] == ["unsent"]
        and target.requests[m1] == target.requests[m2] == 0
        and bool(reported),
        f"states {states[m1]}/{states[m2]}, holds {holds[m1]}/{holds[m2]}, attempts "
        f"{attempts[m1]}/{attempts[m2]}, requests to the target {target.requests[m1]}/"
        f"{target.requests[m2]}, error workflow ran: {bool(reported)}",
    )
    check(
        "node batch, On Hold stop: the held item is held for a person, not written again",
        holds[a0] == ["input_mismatch"] and target.requests[a0] == 1 and states[a0] == "confirmed",
        f"holds {holds[a0]}, requests to the target {target.requests[a0]}",
    )

    answer = post(n8n, "e2e-batch-on", mixed)
    states, holds, attempts = _seen(ledger, read_token, (m1, m2, a0))
    failed = n8n.executions(carry_on, "error")
    check(
        "node batch, On Hold continue: the released items are written once each, confirmed",
        answer.status_code == 200
        and not failed
        and states[m1] == states[m2] == "confirmed"
        and attempts[m1] == attempts[m2] == ["unsent", "confirmed"]
        and target.requests[m1] == target.requests[m2] == 1
        and holds[m1] == holds[m2] == [],
        f"webhook {answer.status_code}, failed executions {len(failed)}, states "
        f"{states[m1]}/{states[m2]}, attempts "
        f"{attempts[m1]}/{attempts[m2]}, requests to the target {target.requests[m1]}/"
        f"{target.requests[m2]}",
    )
    twice = post(n8n, "e2e-batch-on", {"invoices": [{"invoice_id": "batch-D1", "amount": 5}] * 2})
    op = ledger.operation(read_token, op_id("batch-D1"))
    check(
        "node batch: one invoice twice in a batch is written once",
        twice.status_code == 200
        and target.requests["batch-D1"] == 1
        and (op or {}).get("operation", {}).get("state") == "confirmed",
        f"webhook {twice.status_code}, requests to the target {target.requests['batch-D1']}",
    )
    check(
        "node batch, On Hold continue: the held item takes the Hold output, not written",
        target.requests[a0] == 1 and holds[a0] == ["input_mismatch"],
        f"requests to the target {target.requests[a0]}, holds {holds[a0]}",
    )


def _seen(
    ledger: LocalLedger, token: str, invoices: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, list[Any]]]:
    """Each invoice's operation as the ledger tells it: its state, its open holds' reasons and
    its attempts' outcomes."""
    ops = {i: ledger.operation(token, op_id(i)) for i in invoices}
    return (
        {i: (o or {}).get("operation", {}).get("state") for i, o in ops.items()},
        {i: [h["reason"] for h in open_holds(o)] for i, o in ops.items()},
        {i: [a.get("outcome") for a in (o or {}).get("attempts", [])] for i, o in ops.items()},
    )
