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
   422 from the target recorded as ``failed`` with no hold, a 503 as ``unknown`` and held; a
   body without ``invoice_id`` an error naming the field, nothing dispatched; an
   answer without an id not confirmed (the error workflow holds it); n8n SIGKILLed mid-write,
   restarted, the crashed execution retried through the API: no second write, and a hold;
   batches through the node's Guard (a Split Out of three invoices, one of them held), with
   *On Hold* set to stop (the others released: ``prepared``, not written, not held) and to
   continue (the others written once each); one webhook posted twice 50 ms apart (one
   write, one ``duplicate_trigger`` hold naming both executions); an execution that waits
   across a re-publish of its workflow (PUT) and then dispatches (after one sync, one
   ``stale_workflow_version`` hold naming both versions);
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
6. starts a third n8n that prunes to 15 executions every 6 s (``e2e/n8n/acting.py``): n8n
   killed mid-write, the ``execution_failed`` hold released with ``--retry``, the new
   execution writes once and is confirmed and linked; a held execution pinned, n8n down while
   another hold opens (at once; the pin made once n8n is back), both kept through a prune that
   removes their neighbours; a resolved hold's pinned execution deleted when asked.

Without n8n installed it prints how to install it and exits 0 (skipped).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import (
    N8n,
    Unavailable,
    find_n8n,
    install_community_package,
    packed_node_package,
    workdir,
)
from e2e.loopback import Target
from e2e.n8n.acting import acting
from e2e.n8n.batches import batches
from e2e.n8n.checks import Checks
from e2e.n8n.credentials import credential_tests, signing
from e2e.n8n.flows import NODE_TYPE, scenario_copy
from e2e.n8n.scenarios import crash_and_retry, scenarios
from e2e.n8n.setup_runs import setup_refused, setup_twice
from e2e.n8n.twins import twin_webhook
from e2e.n8n.versions import stale_version
from e2e.n8n.without_package import without_package
from flowledger.n8n.setup import TEMPLATES, fill_template, load_template


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
        batches(check, n8n, ledger, target, read_token, node_copy)
        twin_webhook(check, n8n, ledger, target, read_token, flows)
        stale_version(check, n8n, ledger, target, node_example)
        crash_and_retry(check, n8n, ledger, target, read_token, flows)
        credential_tests(check, n8n, ledger)
        signing(check, n8n, ledger, target, read_token, node_example)
        n8n.stop()  # one n8n at a time on a shared machine
        without_package(check, tmp, home, node_dir, target)
        acting(check, tmp, home, node_dir)
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
    with workdir("flowledger-e2e-") as tmp, check.ending_early():
        run(check, tmp, home, node_dir)
    return check.summary("e2e-n8n", started)


if __name__ == "__main__":
    sys.exit(main())
