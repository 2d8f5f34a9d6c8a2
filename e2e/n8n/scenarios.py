"""The write scenarios run through each template's workflow, and n8n killed mid-write."""

from __future__ import annotations

import contextlib
import re
import threading
from functools import partial
from typing import Any

import httpx

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import execution_error, finished, op_id, open_holds, operation_ids, post

# What each template's execution ends with when the body has no ``invoice_id``: the node's
# error names the field its operation id expression reads; the HTTP Request template checks the
# field before its dispatch.
MISSING_ID = {
    "node": "operation ID 'invoice:undefined:send' has a segment 'undefined': the expression "
    "that builds it read a missing field; the item has no $json.body.invoice_id",
    "http": "invoice_id is missing from the body: no operation id can be built from it, "
    "nothing was dispatched",
}


def scenarios(
    check: Checks,
    label: str,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    workflow_id: str,
    path: str,
) -> None:
    """Everything but the crash, through one workflow."""
    prefix = f"{label}-"
    invoices = [f"{prefix}{i}" for i in range(1, 11)]
    for n, invoice in enumerate(invoices):
        post(n8n, path, {"invoice_id": invoice, "amount": 100 + n})
    ops = [ledger.operation(read_token, op_id(i)) for i in invoices]
    confirmed = [o for o in ops if o and o["operation"]["state"] == "confirmed"]
    receipts = [o["operation"]["receipt"] for o in confirmed]
    check(
        f"{label}: 10 writes, each once, each confirmed with the target's id",
        all(target.writes[i] == 1 for i in invoices)
        and len(confirmed) == 10
        and all(str(r).startswith("T-") for r in receipts),
        f"writes {sum(target.writes[i] for i in invoices)}, confirmed {len(confirmed)}",
    )

    again = post(n8n, path, {"invoice_id": invoices[0], "amount": 100})
    op = ledger.operation(read_token, op_id(invoices[0]))
    check(
        f"{label}: the same invoice again is skipped, not written",
        target.requests[invoices[0]] == 1
        and '"skip"' in again.text
        and op is not None
        and op["operation"]["state"] == "confirmed"
        and op["operation"]["receipt"] == receipts[0]
        and not open_holds(op),
        f"webhook {again.status_code}, requests to the target {target.requests[invoices[0]]}, "
        f"operation {(op or {}).get('operation', {}).get('state')} with receipt "
        f"{(op or {}).get('operation', {}).get('receipt')}",
    )

    before = len(n8n.executions(workflow_id, "error"))
    changed = post(n8n, path, {"invoice_id": invoices[0], "amount": 999})
    held = open_holds(ledger.operation(read_token, op_id(invoices[0])))
    errored = wait_for(
        lambda: (e := n8n.executions(workflow_id, "error")) and len(e) > before and e, 15
    )
    shown = execution_error(n8n, str(errored[0]["id"])) if errored else None
    check(
        f"{label}: a changed input is held and the execution fails visibly",
        target.requests[invoices[0]] == 1
        and [h["reason"] for h in held] == ["input_mismatch"]
        and shown == f"flowledger holds {op_id(invoices[0])}: input_mismatch",
        f"webhook {changed.status_code}, holds {[h['reason'] for h in held]}, "
        f"n8n lists the execution as error: {shown!r}",
    )

    # The target refuses (422: nothing written) or cannot say (503: maybe written).
    for prefix, what, want_state, want_holds in (
        ("reject", "a 422 from the target is failed (rejected), with no hold", "failed", []),
        (
            "busy",
            "a 503 from the target is an unknown outcome, held for a person",
            "dispatching",
            ["unknown_outcome"],
        ),
    ):
        invoice = f"{prefix}-{label}"
        post(n8n, path, {"invoice_id": invoice, "amount": 1})
        op = ledger.operation(read_token, op_id(invoice))
        state = op["operation"]["state"] if op else None
        holds = [h["reason"] for h in open_holds(op)]
        check(
            f"{label}: {what}",
            state == want_state and holds == want_holds and target.requests[invoice] == 1,
            f"requests to the target {target.requests[invoice]}, state {state}, holds {holds}",
        )

    missing_id(check, label, n8n, ledger, target, read_token, workflow_id, path)

    no_id = f"noid-{label}"
    post(n8n, path, {"invoice_id": no_id, "amount": 1})
    op = wait_for(
        lambda: (o := ledger.operation(read_token, op_id(no_id))) and open_holds(o) and o, 30
    ) or ledger.operation(read_token, op_id(no_id))
    state = op["operation"]["state"] if op else None
    check(
        f"{label}: an answer without an id is not confirmed; the error workflow holds it",
        target.writes[no_id] == 1
        and state == "dispatching"
        and [h["reason"] for h in open_holds(op)] == ["execution_failed"]
        and not (op or {}).get("receipts"),
        f"state {state}, holds {[h['reason'] for h in open_holds(op)]}",
    )


def missing_id(
    check: Checks,
    label: str,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    workflow_id: str,
    path: str,
) -> None:
    """A body without the field the operation id is built from fails the execution naming
    it, and nothing is dispatched (no ``invoice:undefined:send`` for later bodies to be held
    against)."""
    before_ids = operation_ids(ledger, read_token)
    before_writes = sum(target.requests.values())
    before = len(n8n.executions(workflow_id, "error"))
    post(n8n, path, {"amount": 3})
    errored = wait_for(
        lambda: (e := n8n.executions(workflow_id, "error")) and len(e) > before and e, 15
    )
    shown = execution_error(n8n, str(errored[0]["id"])) if errored else None
    after_ids = operation_ids(ledger, read_token)
    check(
        f"{label}: a body without invoice_id is an error naming it, nothing dispatched",
        shown == MISSING_ID[label]
        and after_ids == before_ids
        and sum(target.requests.values()) == before_writes,
        f"n8n lists the execution as error: {shown!r}, operations "
        f"{len(before_ids)} -> {len(after_ids)}",
    )


def crash_and_retry(
    check: Checks,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    flows: dict[str, tuple[str, str]],
) -> None:
    """SIGKILL n8n while each workflow's write is at the target, restart, retry the crashed
    executions through the API."""
    slow = {label: f"slow-{label}" for label in flows}
    for label, (_wf, path) in flows.items():
        body = {"invoice_id": slow[label], "amount": 5}
        threading.Thread(target=_quiet_post, args=(n8n, path, body), daemon=True).start()
    reached = wait_for(lambda: all(target.writes[i] == 1 for i in slow.values()), 60, 0.1)
    check("the writes reached the target before n8n died", bool(reached))
    n8n.kill()
    n8n.start()
    print("      n8n killed with SIGKILL mid-write and started again", flush=True)
    for label, (workflow_id, _path) in flows.items():
        crashed = wait_for(partial(n8n.executions, workflow_id, "crashed"), 60)
        if not check(f"{label}: n8n marked the killed execution crashed", bool(crashed)):
            continue
        retry = n8n.api("POST", f"/executions/{crashed[0]['id']}/retry", json={})
        retried = wait_for(partial(finished, n8n, str(retry["id"])), 60) or {}
        op = ledger.operation(read_token, op_id(slow[label]))
        state = op["operation"]["state"] if op else None
        stopped_by = execution_error(n8n, str(retry["id"]))
        # The retry must have reached the guard and been held there, not failed before it:
        # in_flight (another execution's dispatch is open), or execution_failed when the
        # error workflow n8n runs for the crashed execution has reported it first.
        held_at_guard = re.fullmatch(
            rf"flowledger holds {re.escape(op_id(slow[label]))}: (in_flight|execution_failed)",
            stopped_by or "",
        )
        check(
            f"{label}: the retry of the crashed execution did not write again",
            target.requests[slow[label]] == 1
            and retried.get("status") == "error"
            and held_at_guard is not None
            and state == "dispatching",
            f"requests to the target {target.requests[slow[label]]}, retry {retry.get('id')} "
            f"ended {retried.get('status')}: {stopped_by!r}, operation {state}",
        )
    ledger.cli("sync", "--once")
    ledger.cli("sweep", "--once")
    for label in flows:
        op = ledger.operation(read_token, op_id(slow[label]))
        reasons = [h["reason"] for h in open_holds(op)]
        check(
            f"{label}: the operation the crash left dispatching is held",
            op is not None and op["operation"]["state"] == "dispatching" and bool(reasons),
            f"holds {reasons} after sync --once and sweep --once",
        )


def _quiet_post(n8n: N8n, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # n8n dies while this waits
        post(n8n, path, body, timeout=180)
