"""The Flowledger API credential as n8n tests it, and a token that must sign its requests."""

from __future__ import annotations

import re
from typing import Any

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import N8n, free_port
from e2e.loopback import Target
from e2e.n8n.checks import Checks
from e2e.n8n.flows import NODE_TYPE, Flow, once_then_skipped, scenario_copy


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
