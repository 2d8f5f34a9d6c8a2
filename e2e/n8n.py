"""The n8n integration end to end, against a real n8n (``make e2e-n8n``; not part of CI).

    python -m e2e.n8n

What it does, printing one line per check:

1. packs ``integrations/n8n`` and installs the tarball as n8n installs community packages
   (``npm install`` inside ``<user folder>/.n8n/nodes``), starts n8n and checks that the node
   type ``n8n-nodes-flowledger.flowledger`` loaded;
2. runs ``flowledger n8n setup --with-example`` twice against that n8n and a fresh ledger (the
   second run must create nothing), then with a key n8n refuses and one lacking a scope (one
   line each, nothing made); the node template is imported as it is;
3. runs the same scenarios through both templates, the node's and the HTTP Request one (a copy
   of each whose write goes to a loopback target and whose webhook answers when done): 10
   writes once each; a repeat skipped; a changed input held (the execution fails, visibly); a
   422 from the target recorded as ``failed`` with no hold, a 503 as ``unknown`` and held; an
   answer without an id not confirmed (the error workflow holds it); n8n SIGKILLed mid-write,
   restarted, the crashed execution retried through the API: no second write, and a hold;
4. tests the Flowledger API credential through n8n (*Test connection*): a read token is the
   wrong scope, an unknown token is refused (401), a closed port is unreachable; runs the node
   template with a token that must sign its requests (v2) against the ledger's
   receiver: the unsigned credential is refused, the signed one writes once and skips a repeat.
5. starts a second n8n without the package and runs ``flowledger n8n setup --with-example``
   against it twice: a Header Auth credential, the HTTP Request error workflow (active) and the
   no-install template, made once; the imported template, given its write URL, writes once and
   skips a repeat, and an execution of it that fails reaches the ledger through that error
   workflow, which holds the operation; ``--workflow ID`` sets an existing workflow's error
   workflow, once.

Without n8n installed it prints how to install it and exits 0 (skipped).
"""

from __future__ import annotations

import contextlib
import copy
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from e2e.local_n8n import (
    API_SCOPES,
    LocalLedger,
    N8n,
    Target,
    Unavailable,
    find_n8n,
    free_port,
    install_community_package,
    packed_node_package,
    workdir,
)
from flowledger.n8n_setup import (
    HEADER_CREDENTIAL_TYPE,
    SETTINGS_NODE,
    TEMPLATES,
    credential_name,
    fill_template,
    load_template,
)

NODE_TYPE = "n8n-nodes-flowledger.flowledger"
WRITE = "Write to target (your API)"
WEBHOOK = "Invoice to send"


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'ok  ' if ok else 'FAIL'}  {name}{f'  ({detail})' if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok


def wait_for(what: Callable[[], Any], timeout: float = 30.0, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(every)


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


def open_holds(op: dict[str, Any] | None) -> list[dict[str, Any]]:
    return [h for h in (op or {}).get("holds", []) if h.get("resolved_at") is None]


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


def execution_error(n8n: N8n, execution_id: str) -> str | None:
    """The message of the error that ended an execution, as n8n shows it."""
    execution = n8n.api("GET", f"/executions/{execution_id}", params={"includeData": "true"})
    error = (((execution or {}).get("data") or {}).get("resultData") or {}).get("error") or {}
    message = error.get("message")
    return str(message) if message is not None else None


def finished(n8n: N8n, execution_id: str) -> dict[str, Any] | None:
    execution = n8n.api("GET", f"/executions/{execution_id}")
    return execution if execution.get("stoppedAt") else None


def _quiet_post(n8n: N8n, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # n8n dies while this waits
        post(n8n, path, body, timeout=180)


def credential_tests(check: Checks, n8n: N8n, ledger: LocalLedger) -> None:
    """*Test connection* of the Flowledger API credential, run by n8n itself, for each thing
    that can be wrong."""
    closed = f"http://127.0.0.1:{free_port()}"
    cases = [
        (
            "a read token: the wrong scope",
            ledger.url,
            ledger.token("e2e-reader", "read"),
            r"has the read scope; the Flowledger node needs a write token",
        ),
        (
            "an unknown token: refused (401)",
            ledger.url,
            "flt_" + "x" * 40,
            r"the ledger refused the token \(401",
        ),
        (
            "a closed port: unreachable",
            closed,
            ledger.token("e2e-closed", "write"),
            rf"cannot reach the ledger at {re.escape(closed)} \(ECONNREFUSED\)",
        ),
    ]
    for label, url, token, expected in cases:
        made = n8n.api(
            "POST",
            "/credentials",
            json={
                "name": f"Flowledger API ({label})",
                "type": "flowledgerApi",
                "data": {"baseUrl": url, "token": token, "signingSecret": "", "source": "x"},
            },
        )
        said = n8n.api("POST", f"/credentials/{made['id']}/test")
        check(
            f"credential test: {label}",
            said.get("status") == "Error"
            and re.search(expected, str(said.get("message"))) is not None,
            str(said.get("message")),
        )


def signing(
    check: Checks,
    n8n: N8n,
    ledger: LocalLedger,
    target: Target,
    read_token: str,
    node_example: dict[str, Any],
) -> None:
    """The node template with a credential whose token must sign (v2), against the ledger's
    receiver, which checks each signature and accepts it once."""
    token, secret = ledger.signing_token("e2e-signed")

    def credential(name: str, signing_secret: str) -> dict[str, Any]:
        data = {"baseUrl": ledger.url, "token": token, "signingSecret": signing_secret}
        made = n8n.api(
            "POST",
            "/credentials",
            json={"name": name, "type": "flowledgerApi", "data": {**data, "source": "local-n8n"}},
        )
        return dict(made)

    unsigned = credential("Flowledger API (signing token, no secret)", "")
    refused = n8n.api("POST", f"/credentials/{unsigned['id']}/test")
    check(
        "signing: the ledger refuses the signing token's unsigned requests (credential test)",
        refused.get("status") == "Error" and "sign" in str(refused.get("message")),
        str(refused.get("message")),
    )
    signed = credential("Flowledger API (signed)", secret)
    tested = n8n.api("POST", f"/credentials/{signed['id']}/test")
    check(
        "signing: the credential test's signed GET is accepted by the ledger",
        tested.get("status") == "OK",
        str(tested.get("message")),
    )
    workflow = scenario_copy(node_example, "e2e: signed node guard", "e2e-signed", target.url)
    for node in workflow["nodes"]:
        if node["type"] == NODE_TYPE:
            node["credentials"] = {"flowledgerApi": {"id": signed["id"], "name": signed["name"]}}
    n8n.create_workflow(workflow, activate=True)
    invoice = "sig-na\u00efve/x?y=1"  # an operation id beyond ASCII, with / and ?, encoded
    body = {"invoice_id": invoice, "amount": 7, "note": "\u201cquoted\u201d"}
    once_then_skipped(
        check,
        "signing: signed guard and confirm (non-ASCII body, encoded path)",
        Flow(n8n, ledger, target, read_token, "e2e-signed"),
        body,
    )


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
SETUP = ("n8n", "setup", "--source", "local-n8n", "--with-example", "--ledger-url")
FIRST_SETUP = [
    ("activated", "workflow"),
    ("created", "credential"),
    ("created", "token"),
    ("created", "workflow"),
    ("created", "workflow"),
]


def setup_twice(check: Checks, label: str, ledger: LocalLedger, *, installed: bool) -> None:
    """``flowledger n8n setup --with-example`` twice: everything made once, then nothing."""
    first = ledger.cli(*SETUP, ledger.url)
    second = ledger.cli(*SETUP, ledger.url)
    for shown, output in (("", first), (" (again)", second)):
        print(f"      $ flowledger {' '.join(SETUP)} ...{shown}")
        print("".join(f"      | {line}\n" for line in output.splitlines()), end="")
    node = "installed" if installed else "not installed: Header Auth template"
    made = re.findall(r"^(created|activated)\s+(\w+)", first, re.MULTILINE)
    check(
        f"{label}, first run: token, credential, active error workflow, example",
        f"Flowledger node {node}\n" in first and sorted(made) == FIRST_SETUP,
        f"Flowledger node {node}",
    )
    check(f"{label}, second run: creates nothing", not re.search("created|activated", second))


def setup_refused(check: Checks, n8n: N8n, ledger: LocalLedger) -> None:
    """``flowledger n8n setup`` with an API key n8n refuses, and with one lacking a scope: one
    line each, nothing made."""
    full = n8n.api_key
    before = len(n8n.api("GET", "/credentials")["data"])
    for label, key, expected in (
        ("an API key n8n does not know", "n8n_api_" + "0" * 40, r"refused the API key \(401\)"),
        (
            "an API key without workflow:list",
            n8n.api_key_with([s for s in API_SCOPES if s != "workflow:list"]),
            r"the n8n API key lacks the workflow:list scope \(403\)",
        ),
    ):
        n8n.api_key = key  # the key the ledger's flowledger.toml reads from its environment
        try:
            said = ledger.cli(*SETUP, ledger.url, check=False).strip()
        finally:
            n8n.api_key = full
        print(f"      | {said}")
        check(
            f"n8n setup with {label}: one line naming it",
            len(said.splitlines()) == 1 and re.search(expected, said) is not None,
        )
    check(
        "n8n setup refused: nothing made",
        len(n8n.api("GET", "/credentials")["data"]) == before,
    )


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


def run(check: Checks, tmp: Path, home: Path, node_dir: Path | None) -> None:
    tarball = packed_node_package(tmp)
    n8n = N8n(home, node_dir, tmp / "n8n")
    install_community_package(n8n.user_folder, tarball)
    print(
        f"      {tarball.name} ({tarball.stat().st_size // 1024} kB) installed into "
        f"<user folder>/.n8n/nodes",
        flush=True,
    )
    target = Target()
    ledger = LocalLedger(tmp / "ledger", n8n)
    ledger.folder.mkdir()
    try:
        started = time.monotonic()
        n8n.start()
        n8n.make_owner_and_key()
        print(
            f"      n8n at {n8n.url} answered after {time.monotonic() - started:.0f} s", flush=True
        )
        types = n8n.node_types()
        check(
            "the packed package loads: node type n8n-nodes-flowledger.flowledger",
            NODE_TYPE in types,
        )
        ledger.start()

        setup_twice(check, "n8n setup", ledger, installed=True)
        setup_refused(check, n8n, ledger)

        workflows = {
            w["name"]: w for w in n8n.api("GET", "/workflows", params={"limit": 250})["data"]
        }
        node_example_name, _ = load_template(TEMPLATES, True, "example")
        node_example = n8n.api("GET", f"/workflows/{workflows[node_example_name]['id']}")
        check(
            "the node template imported as it is (guard, confirm and fail: Flowledger nodes)",
            sum(n["type"] == NODE_TYPE for n in node_example["nodes"]) == 3,
        )
        read_token = ledger.token("e2e-read", "read")

        node_copy = scenario_copy(node_example, "e2e: node guard", "e2e-node", target.url)
        node_id = n8n.create_workflow(node_copy, activate=True)

        http_token = ledger.token("e2e-http", "write")
        cred = n8n.api(
            "POST",
            "/credentials",
            json={
                "name": "flowledger write token (e2e)",
                "type": "httpHeaderAuth",
                "data": {"name": "Authorization", "value": f"Bearer {http_token}"},
            },
        )
        fill = dict(
            credential_id=cred["id"],
            credential_name=cred["name"],
            ledger_url=ledger.url,
            source="local-n8n",
        )
        _, http_error = load_template(TEMPLATES, False, "error")
        http_error_id = n8n.create_workflow(
            fill_template(http_error, **fill, error_workflow_id=None), activate=True
        )
        _, http_example = load_template(TEMPLATES, False, "example")
        http_filled = fill_template(http_example, **fill, error_workflow_id=http_error_id)
        http_copy = scenario_copy(http_filled, "e2e: HTTP Request guard", "e2e-http", target.url)
        http_id = n8n.create_workflow(http_copy, activate=True)
        time.sleep(1)

        flows = {"node": (node_id, "e2e-node"), "http": (http_id, "e2e-http")}
        for label, (workflow_id, path) in flows.items():
            scenarios(check, label, n8n, ledger, target, read_token, workflow_id, path)
        crash_and_retry(check, n8n, ledger, target, read_token, flows)
        credential_tests(check, n8n, ledger)
        signing(check, n8n, ledger, target, read_token, node_example)
        n8n.stop()  # one n8n at a time on a shared machine
        without_package(check, tmp, home, node_dir, target)
    finally:
        n8n.stop()
        ledger.stop()
        target.close()


def main() -> int:
    # A SIGTERM (from `timeout`, a supervisor) unwinds through the ``finally`` blocks, which
    # stop n8n and the ledger: they run in sessions of their own and would outlive us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        home, node_dir = find_n8n()
    except Unavailable as exc:
        print(f"e2e-n8n SKIPPED: {exc}")
        return 0
    check = Checks()
    started = time.monotonic()
    with workdir("flowledger-e2e-") as tmp:
        try:
            run(check, tmp, home, node_dir)
        except Exception as exc:  # a broken step ends the run; say which
            check(f"the run ended early: {type(exc).__name__}: {exc}", False)
    took = time.monotonic() - started
    print(f"e2e-n8n: {check.passed} passed, {len(check.failed)} failed in {took:.0f} s")
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
