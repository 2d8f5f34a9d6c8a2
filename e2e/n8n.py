"""The n8n integration end to end, against a real n8n (``make e2e-n8n``; not part of CI).

    python -m e2e.n8n

What it does, printing one line per check:

1. packs ``integrations/n8n`` and installs the tarball as n8n installs community packages
   (``npm install`` inside ``<user folder>/.n8n/nodes``), starts n8n and checks that the node
   type ``n8n-nodes-flowledger.flowledger`` loaded;
2. runs ``flowledger n8n setup --with-example`` twice against that n8n and a fresh ledger (the
   second run must create nothing); the node template is imported as it is;
3. runs the same scenarios through both templates, the node's and the HTTP Request one (a copy
   of each whose write goes to a loopback target and whose webhook answers when done): 10
   writes once each; a repeat skipped; a changed input held (the execution fails, visibly); a
   422 from the target recorded as ``failed`` with no hold; an answer without an id not
   confirmed (the error workflow holds it); n8n SIGKILLed mid-write, restarted, the crashed
   execution retried through the API: no second write, and a hold;
4. checks request signing (v2) as n8n really sends it against a stand-in that verifies it
   (the ledger's receiver still verifies the older v1 form, so signing is off against it).

Without n8n installed it prints how to install it and exits 0 (skipped).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import hmac
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from e2e.local_n8n import (
    LocalLedger,
    N8n,
    Target,
    Unavailable,
    find_n8n,
    install_community_package,
    packed_node_package,
    workdir,
)
from ledger.n8n_setup import TEMPLATES, fill_template, load_template

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
    return httpx.post(f"{n8n.url}/webhook/{path}", json=body, timeout=timeout)


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
    check(
        f"{label}: the same invoice again is skipped, not written",
        target.writes[invoices[0]] == 1 and '"skip"' in again.text,
        f"webhook {again.status_code}, writes {target.writes[invoices[0]]}",
    )

    before = len(n8n.executions(workflow_id, "error"))
    changed = post(n8n, path, {"invoice_id": invoices[0], "amount": 999})
    held = open_holds(ledger.operation(read_token, op_id(invoices[0])))
    errored = wait_for(lambda: len(n8n.executions(workflow_id, "error")) > before, 15)
    check(
        f"{label}: a changed input is held and the execution fails visibly",
        target.writes[invoices[0]] == 1
        and [h["reason"] for h in held] == ["input_mismatch"]
        and bool(errored),
        f"webhook {changed.status_code}, holds {[h['reason'] for h in held]}, "
        f"n8n lists the execution as error: {bool(errored)}",
    )

    rejected = f"reject-{label}"
    post(n8n, path, {"invoice_id": rejected, "amount": 1})
    op = ledger.operation(read_token, op_id(rejected))
    state = op["operation"]["state"] if op else None
    check(
        f"{label}: a 422 from the target is failed (rejected), with no hold",
        state == "failed" and not open_holds(op) and target.writes[rejected] == 0,
        f"state {state}, holds {[h['reason'] for h in open_holds(op)]}",
    )

    no_id = f"noid-{label}"
    post(n8n, path, {"invoice_id": no_id, "amount": 1})
    op = wait_for(
        lambda: (o := ledger.operation(read_token, op_id(no_id))) and open_holds(o) and o, 30
    ) or ledger.operation(read_token, op_id(no_id))
    state = op["operation"]["state"] if op else None
    check(
        f"{label}: an answer without an id is not confirmed; the error workflow holds it",
        state == "dispatching"
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
        retried = wait_for(partial(finished, n8n, str(retry["id"])), 60)
        op = ledger.operation(read_token, op_id(slow[label]))
        state = op["operation"]["state"] if op else None
        check(
            f"{label}: the retry of the crashed execution did not write again",
            target.writes[slow[label]] == 1,
            f"writes {target.writes[slow[label]]}, retry {retry.get('id')} ended "
            f"{(retried or {}).get('status')}, operation {state}",
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


def finished(n8n: N8n, execution_id: str) -> dict[str, Any] | None:
    execution = n8n.api("GET", f"/executions/{execution_id}")
    return execution if execution.get("stoppedAt") else None


def _quiet_post(n8n: N8n, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(httpx.HTTPError):  # n8n dies while this waits
        post(n8n, path, body, timeout=180)


class SignatureChecker:
    """A stand-in ledger that checks ``X-Flowledger-Signature: t=…,v2=…`` exactly as DESIGN.md
    states it (HMAC-SHA256 of "t.METHOD.PATH.body", PATH as sent) and records each verdict."""

    def __init__(self, key: bytes) -> None:
        self.verdicts: list[tuple[str, str, bool]] = []
        checker = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _check(self, body: bytes) -> bool:
                header = self.headers.get("x-flowledger-signature", "")
                parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
                stamp = parts.get("t", "")
                message = f"{stamp}.{self.command}.{self.path}.".encode() + body
                expected = hmac.new(key, message, hashlib.sha256).hexdigest()
                fresh = stamp.isdigit() and abs(time.time() - int(stamp)) < 300
                ok = fresh and hmac.compare_digest(expected, parts.get("v2", ""))
                checker.verdicts.append((self.command, self.path, ok))
                return ok

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if not self._check(b""):
                    return self._send(
                        401,
                        {
                            "error": {
                                "code": "bad_signature",
                                "message": "v2 does not match",
                                "field": None,
                            }
                        },
                    )
                self._send(200, {"name": "signed", "scope": "write", "signing": True})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if not self._check(body):
                    return self._send(
                        401,
                        {
                            "error": {
                                "code": "bad_signature",
                                "message": "v2 does not match",
                                "field": None,
                            }
                        },
                    )
                op = self.path.split("/")[3]
                self._send(
                    200,
                    {
                        "operation_id": op,
                        "decision": "go",
                        "state": "dispatching",
                        "attempt": 1,
                        "reason": None,
                        "receipt": None,
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signing(check: Checks, n8n: N8n) -> None:
    secret = "5a" * 32
    checker = SignatureChecker(bytes.fromhex(secret))
    try:
        cred = n8n.api(
            "POST",
            "/credentials",
            json={
                "name": "Flowledger API (signed, stand-in)",
                "type": "flowledgerApi",
                "data": {
                    "baseUrl": checker.url,
                    "token": "flt_stand_in",
                    "signingSecret": secret,
                    "source": "",
                },
            },
        )
        tested = n8n.api("POST", f"/credentials/{cred['id']}/test")
        check(
            "signing: the credential test's GET is signed v2 as the design states",
            tested.get("status") == "OK" and checker.verdicts[-1:] == [("GET", "/v1/token", True)],
            str(tested.get("message")),
        )
        workflow = {
            "name": "e2e: signed guard",
            "nodes": [
                {
                    "parameters": {
                        "httpMethod": "POST",
                        "path": "e2e-signed",
                        "responseMode": "lastNode",
                        "options": {},
                    },
                    "id": "e2e-signed-1",
                    "name": WEBHOOK,
                    "type": "n8n-nodes-base.webhook",
                    "typeVersion": 2,
                    "position": [0, 0],
                    "webhookId": "e2e-signed",
                },
                {
                    "parameters": {
                        "operationId": "={{ 'sig:' + $json.body.n + ':ü/x?y' }}",
                        "processingVersion": "v1",
                        "inputSource": "value",
                        "inputValue": "={{ $json.body }}",
                        "onHold": "output",
                    },
                    "id": "e2e-signed-2",
                    "name": "Guard",
                    "type": NODE_TYPE,
                    "typeVersion": 1,
                    "position": [200, 0],
                    "credentials": {
                        "flowledgerApi": {
                            "id": cred["id"],
                            "name": "Flowledger API (signed, stand-in)",
                        }
                    },
                },
            ],
            "connections": {WEBHOOK: {"main": [[{"node": "Guard", "type": "main", "index": 0}]]}},
            "settings": {"executionOrder": "v1"},
        }
        n8n.create_workflow(workflow, activate=True)
        body = {"n": 1, "text": "na\u00efve \u201cquoted\u201d"}  # bytes beyond ASCII
        answer = wait_for(lambda: (a := post(n8n, "e2e-signed", body)).status_code != 404 and a, 10)
        posts = [v for v in checker.verdicts if v[0] == "POST"]
        check(
            "signing: a Guard's POST (non-ASCII body, encoded path) is signed v2 as sent",
            bool(answer) and answer.status_code == 200 and len(posts) == 1 and posts[0][2],
            f"{posts[0][1] if posts else 'no request'}; webhook "
            f"{answer.status_code if answer else 404}",
        )
    finally:
        checker.close()


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

        first = ledger.cli(
            "n8n", "setup", "--source", "local-n8n", "--with-example", "--ledger-url", ledger.url
        )
        print("      $ flowledger n8n setup --source local-n8n --with-example --ledger-url ...")
        print("".join(f"      | {line}\n" for line in first.splitlines()), end="")
        second = ledger.cli(
            "n8n", "setup", "--source", "local-n8n", "--with-example", "--ledger-url", ledger.url
        )
        print("      $ (again)")
        print("".join(f"      | {line}\n" for line in second.splitlines()), end="")
        made = re.findall(r"^(created|activated)\s+(\w+)", first, re.MULTILINE)
        check(
            "n8n setup, first run: token, credential, active error workflow, example",
            sorted(made)
            == sorted(
                [
                    ("created", "token"),
                    ("created", "credential"),
                    ("created", "workflow"),
                    ("created", "workflow"),
                    ("activated", "workflow"),
                ]
            ),
        )

        check(
            "n8n setup, second run: creates nothing",
            "created" not in second and "activated" not in second,
        )

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
        signing(check, n8n)
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
