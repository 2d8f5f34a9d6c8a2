"""Twin triggers through a real n8n: one webhook call posted twice 50 ms apart starts two
executions of the workflow; the ledger lets one write and records the pair on one
``duplicate_trigger`` hold naming both executions."""

from __future__ import annotations

import json
import threading
import time

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import Flow, op_id, post

GAP = 0.05  # seconds between the two posts, as n8n's users see their webhooks fire twice


def twin_webhook(
    check: Checks,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    flows: dict[str, tuple[str, str]],
) -> None:
    """Per template: the same body posted twice, 50 ms apart."""
    for label, (workflow_id, path) in flows.items():
        _posted_twice(check, label, Flow(n8n, ledger, target, read_token, path), workflow_id)


def _new_executions(n8n: N8n, workflow_id: str, before: set[str]) -> list[str]:
    return [str(e["id"]) for e in n8n.executions(workflow_id) if str(e["id"]) not in before]


def _posted_twice(check: Checks, label: str, flow: Flow, workflow_id: str) -> None:
    n8n, ledger, target = flow.n8n, flow.ledger, flow.target
    invoice = f"twin-{label}"
    body = {"invoice_id": invoice, "amount": 7}
    before = set(_new_executions(n8n, workflow_id, set()))
    posts = [threading.Thread(target=post, args=(n8n, flow.path, body)) for _ in range(2)]
    posts[0].start()
    time.sleep(GAP)
    posts[1].start()
    for thread in posts:
        thread.join(timeout=120)
    started = (
        wait_for(lambda: len(new := _new_executions(n8n, workflow_id, before)) == 2 and new, 30)
        or []
    )
    op = ledger.operation(flow.read_token, op_id(invoice))
    state = op["operation"]["state"] if op else None
    holds = [
        h
        for h in json.loads(ledger.cli("holds", "--reason", "duplicate_trigger", "--json"))
        if op_id(invoice) in h["detail"]
    ]
    detail = holds[0]["detail"] if holds else ""
    named = [e for e in started if f" {e} " in f" {detail.replace(':', ' ')} "]
    check(
        f"{label}: one webhook posted twice 50 ms apart: one write, one duplicate_trigger "
        "hold naming both executions",
        target.writes[invoice] == 1
        and state == "confirmed"
        and len(holds) == 1
        and not holds[0]["blocking"]
        and len(started) == 2
        and len(named) == 2,
        f"writes {target.writes[invoice]}, state {state}, executions {sorted(started)}, "
        f"holds {[h['detail'] for h in holds]}",
    )
    if holds:
        print(f"      hold {holds[0]['id']}: {detail}", flush=True)
