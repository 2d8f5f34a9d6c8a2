"""How deploy/compose.yaml gives n8n the Flowledger node, tried on a real n8n outside a
container (n8n's own image may not be pullable): only the package's ``package.json`` and built
``dist/`` in ``<user folder>/.n8n/nodes/node_modules/n8n-nodes-flowledger``, nothing installed,
and ``flowledger n8n setup`` sees the node there. Skipped without the local n8n ``make e2e-n8n``
uses (e2e/local_n8n.py says how to install one)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from e2e.local_ledger import LocalLedger
from e2e.local_n8n import PACKAGE, N8n, Unavailable, find_n8n
from e2e.n8n.checks import Checks
from e2e.n8n.flows import NODE_TYPE


def as_compose_mounts_it(user_folder: Path) -> None:
    """The package where compose.yaml mounts it: its package.json and dist/, no more."""
    if not (PACKAGE / "node_modules").exists():
        subprocess.run(["npm", "ci"], cwd=PACKAGE, check=True, capture_output=True)
    subprocess.run(["npm", "run", "build"], cwd=PACKAGE, check=True, capture_output=True)
    target = user_folder / ".n8n" / "nodes" / "node_modules" / "n8n-nodes-flowledger"
    target.mkdir(parents=True)
    shutil.copy(PACKAGE / "package.json", target / "package.json")
    shutil.copytree(PACKAGE / "dist", target / "dist")


def node_from_its_folder(check: Checks, folder: Path) -> None:
    try:
        home, node_dir = find_n8n()
    except Unavailable:
        print("      (no local n8n, FLOWLEDGER_E2E_N8N: the node folder is not tried on n8n)")
        return
    n8n = N8n(home, node_dir, folder / "n8n")
    as_compose_mounts_it(n8n.user_folder)
    ledger = LocalLedger(folder / "ledger", n8n)
    ledger.folder.mkdir()
    try:
        n8n.start()
        n8n.make_owner_and_key()
        check(
            "compose: n8n loads the node from package.json and dist/ in .n8n/nodes/node_modules",
            NODE_TYPE in n8n.node_types(),
        )
        ledger.start()
        said = ledger.cli("n8n", "setup", "--source", "local-n8n")
        check(
            "compose: `flowledger n8n setup` finds the node there (its own credential type)",
            "Flowledger node installed" in said and "flowledgerApi" in said,
        )
    finally:
        n8n.stop()
        ledger.stop()
