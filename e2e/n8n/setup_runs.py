"""``flowledger n8n setup`` run against a real n8n: twice, and with API keys n8n refuses."""

from __future__ import annotations

import re

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import API_SCOPES, N8n
from e2e.n8n.checks import Checks

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
