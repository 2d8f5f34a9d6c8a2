"""What the ledger does in n8n, against a real one that prunes: a hold's execution pinned
and kept while its neighbours are pruned; n8n killed mid-write, the hold released with
``--retry``, the write made once by the new execution; n8n down while a hold opens, the pin
made once it is back; the pinned executions of resolved holds deleted when asked."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import API_SCOPES, N8n
from e2e.loopback import Target
from e2e.n8n.checks import Checks, wait_for
from e2e.n8n.flows import op_id, open_holds, post, scenario_copy
from e2e.n8n.setup_runs import SETUP
from flowledger.n8n.setup import TEMPLATES, load_template

# n8n prunes every 6 s down to the 15 newest executions, at once (the facts: the
# interval times 60 must be whole seconds, or nothing is ever pruned).
PRUNING = {
    "EXECUTIONS_DATA_PRUNE": "true",
    "EXECUTIONS_DATA_PRUNE_MAX_COUNT": "15",
    "EXECUTIONS_DATA_PRUNE_SOFT_DELETE_INTERVAL": "0.1",
    "EXECUTIONS_DATA_PRUNE_HARD_DELETE_INTERVAL": "0.1",
    "EXECUTIONS_DATA_HARD_DELETE_BUFFER": "0",
}
SCOPES = [*API_SCOPES, "executionTags:update", "executionTags:list", "execution:delete"]
PATH = "e2e-acting"


def acting(check: Checks, tmp: Path, home: Path, node_dir: Path | None) -> None:
    """Start an n8n that prunes hard, a ledger beside it, the HTTP Request template writing
    to a :class:`Target` (whose ``hang`` invoices are never written); then the checks."""
    n8n = N8n(home, node_dir, tmp / "n8n-acting", env_extra=PRUNING)
    n8n.user_folder.mkdir()
    ledger = LocalLedger(tmp / "ledger-acting", n8n)
    ledger.folder.mkdir()
    target = Target()
    try:
        n8n.start()
        n8n.make_owner_and_key()
        n8n.api_key = n8n.api_key_with(SCOPES)
        print(f"      a third n8n, pruning to 15 executions every 6 s, at {n8n.url}", flush=True)
        ledger.start()
        ledger.cli(*SETUP, ledger.url)
        checked = ledger.cli("sources", "check", "local-n8n")
        check(
            "acting: sources check finds every scope the ledger acts with",
            "ok:" in checked and "lacks" not in checked,
            checked.strip().replace("\n", " | "),
        )
        workflow_id = _guarded_workflow(n8n, target)
        read = ledger.token("e2e-acting-read", "read")
        _retry_after_crash(check, n8n, ledger, target, read, workflow_id)
        _pins(check, n8n, ledger, read)
    finally:
        target.let_go.set()
        n8n.stop()
        ledger.stop()
        target.close()


def _guarded_workflow(n8n: N8n, target: Target) -> str:
    """The no-install template setup imported, writing to ``target``, active."""
    workflows = {w["name"]: w for w in n8n.api("GET", "/workflows", params={"limit": 250})["data"]}
    example_name, _ = load_template(TEMPLATES, False, "example")
    example = n8n.api("GET", f"/workflows/{workflows[example_name]['id']}")
    given = scenario_copy(example, example_name, PATH, target.url)
    n8n.api("PUT", f"/workflows/{example['id']}", json=given)
    n8n.api("POST", f"/workflows/{example['id']}/activate")
    wait_for(lambda: post(n8n, PATH, {"invoice_id": "warm-up", "amount": 1}).status_code == 200)
    return str(example["id"])


def _retry_after_crash(
    check: Checks, n8n: N8n, ledger: LocalLedger, target: Target, read: str, wf: str
) -> None:
    """n8n killed while its write is at the target (which never carries it out); the hold
    the crash leaves is released with ``--retry``: n8n runs the execution again, which writes
    once and is confirmed, linked to the operation."""
    invoice = "hang-1"
    threading.Thread(
        target=_quiet_post, args=(n8n, {"invoice_id": invoice, "amount": 9}), daemon=True
    ).start()
    reached = wait_for(lambda: target.requests[invoice] == 1, 60, 0.1)
    check("acting: the write reached the target before n8n died", bool(reached))
    n8n.kill()
    target.let_go.set()
    n8n.start()
    print("      n8n killed with SIGKILL mid-write and started again", flush=True)
    crashed = wait_for(partial(n8n.executions, wf, "crashed"), 60) or []
    ledger.cli("sync", "--once")
    ledger.cli("sweep", "--once")
    op = ledger.operation(read, op_id(invoice)) or {}
    holds = open_holds(op)
    check(
        "acting: the crash leaves the operation held as execution_failed",
        bool(crashed) and [h["reason"] for h in holds] == ["execution_failed"],
        f"crashed {[e['id'] for e in crashed]}, holds {[h['reason'] for h in holds]}",
    )
    if not holds:
        return
    hold = holds[0]
    said = ledger.cli(
        "hold", str(hold["id"]), "release", "--retry", "--yes",
        "--note", "the target has no record of hang-1", check=False,
    )  # fmt: skip
    new = re.search(r"as execution (\d+)", said)
    op = wait_for(
        lambda: (o := ledger.operation(read, op_id(invoice))) and o["operation"]["state"]
        == "confirmed" and o, 60,
    ) or ledger.operation(read, op_id(invoice)) or {}  # fmt: skip
    retries = op.get("retries") or [{}]
    attempts = op.get("attempts") or []
    receipt = (op.get("operation") or {}).get("receipt")
    check(
        "acting: release --retry -> a new execution -> one write at the target in all, "
        "confirmed with its receipt, the new execution linked",
        new is not None
        and target.writes[invoice] == 1
        and op["operation"]["state"] == "confirmed"
        and str(receipt).startswith("T-")
        and retries[0].get("new_execution_id") == new.group(1)
        and attempts[-1]["execution_id"] == new.group(1)
        and hold["execution_id"] == str(crashed[0]["id"]),
        f"said {said.strip()!r}, writes {target.writes[invoice]}, requests "
        f"{target.requests[invoice]}, operation {op.get('operation', {}).get('state')} "
        f"receipt {receipt}, retries {retries}, attempts "
        f"{[(a['number'], a['execution_id']) for a in attempts]}",
    )
    print(f"      $ flowledger hold {hold['id']} release --retry: {said.strip()}", flush=True)


def _pins(check: Checks, n8n: N8n, ledger: LocalLedger, read: str) -> None:
    """A held execution pinned by the scheduler's job; n8n down while another hold opens,
    that hold open at once and its pin made once n8n is back; both kept through a prune that
    removes their unpinned neighbours of the same age; then deleted when a person asks."""
    write = ledger.token("e2e-acting-write", "write")
    old = [_run(n8n, f"old-{i}") for i in range(3)]
    post(n8n, PATH, {"invoice_id": "busy-1", "amount": 1})  # 503: outcome unknown, held
    busy = ledger.operation(read, op_id("busy-1")) or {}
    busy_holds = open_holds(busy)
    held = busy_holds[0]["execution_id"] if busy_holds else None
    new = [_run(n8n, f"new-{i}") for i in range(3)]
    acted = ledger.cli("act", "--once")
    check(
        "acting: the held execution is pinned by the scheduler's job, an event",
        held is not None and "pinned 1 execution" in acted and _pinned(ledger, read, "busy-1"),
        f"held execution {held}, {acted.strip()}",
    )

    # n8n down: a hold about one of its executions opens at once, the pin waits.
    n8n.stop()
    about = new[-1]
    started = time.monotonic()
    answered = _held_call(ledger, write, "down-1", about)
    took = time.monotonic() - started
    opened = [h["reason"] for h in open_holds(ledger.operation(read, op_id("down-1")))]
    waiting = ledger.cli("act", "--once")
    check(
        "acting: with n8n down a hold opens at once; its pin waits",
        answered and opened == ["unknown_outcome"] and took < 2.0
        and "pinned 0 executions (1 waiting)" in waiting,
        f"the fail call answered in {took:.2f} s, holds {opened}, {waiting.strip()}",
    )  # fmt: skip
    n8n.start()
    time.sleep(6)  # the pin's first backoff (5 s)
    back = ledger.cli("act", "--once")
    check(
        "acting: once n8n is back the pin arrives",
        "pinned 1 execution" in back and _pinned(ledger, read, "down-1"),
        back.strip(),
    )

    for i in range(20):
        _run(n8n, f"fill-{i}")
    neighbours = [*old, *new[:-1]]
    gone = wait_for(lambda: all(_status(n8n, e) == 404 for e in neighbours), 90, 1)
    kept = {e: _status(n8n, e) for e in (held, about)}
    check(
        "acting: the pinned executions survive a prune that removed their neighbours of the "
        "same age",
        bool(gone) and set(kept.values()) == {200},
        f"neighbours {[(e, _status(n8n, e)) for e in neighbours]}, pinned {kept}",
    )

    # Once resolved, listed; deleted in n8n only when asked.
    for hold in open_holds(busy):
        ledger.cli("hold", str(hold["id"]), "cancel", "--yes", "--note", "e2e: done")
    ledger.cli("sync", "--once")  # the ledger's copy first: only then is one deleted
    listed = ledger.cli("sources")
    deleted = ledger.cli("sources", "delete-pinned", "local-n8n", "--yes")
    check(
        "acting: a pinned execution of a resolved hold is listed, and deleted in n8n when asked",
        f"local-n8n  {held}" in re.sub(r" +", "  ", listed)
        and f"execution {held}: deleted" in deleted
        and _status(n8n, held) == 404
        and _status(n8n, about) == 200,
        deleted.strip().replace("\n", " | "),
    )


def _run(n8n: N8n, invoice: str) -> str:
    """One guarded write; the id of the execution that made it."""
    answer = post(n8n, PATH, {"invoice_id": invoice, "amount": 1})
    answer.raise_for_status()
    newest = n8n.api("GET", "/executions", params={"limit": 1})["data"]
    return str(newest[0]["id"])


def _status(n8n: N8n, execution_id: str | None) -> int:
    with n8n.client() as c:
        return c.get(
            f"/api/v1/executions/{execution_id}", headers={"X-N8N-API-KEY": n8n.api_key}
        ).status_code


def _pinned(ledger: LocalLedger, read: str, invoice: str) -> bool:
    op = ledger.operation(read, op_id(invoice)) or {}
    return any(e["kind"] == "execution_pinned" for e in op.get("events", []))


def _held_call(ledger: LocalLedger, token: str, invoice: str, execution_id: str) -> bool:
    """A dispatch and a fail ``unknown`` made as that n8n execution (its hold opens then):
    whether both were answered."""
    headers = {"Authorization": f"Bearer {token}"}
    body = {
        "input": {"invoice_id": invoice}, "processing_version": "e2e", "execution_id":
        execution_id, "source": "local-n8n",
    }  # fmt: skip
    with httpx.Client(base_url=ledger.url, headers=headers, timeout=10) as c:
        c.post(f"/v1/operations/{op_id(invoice)}/dispatch", json=body).raise_for_status()
        failed = c.post(
            f"/v1/operations/{op_id(invoice)}/fail",
            json={"outcome": "unknown", "error": "timeout", "execution_id": execution_id},
        )
    return failed.status_code == 200


def _quiet_post(n8n: N8n, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # n8n dies while this waits
        post(n8n, PATH, body, timeout=180)
