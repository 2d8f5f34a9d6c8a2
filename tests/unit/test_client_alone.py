"""The client stands alone: importing it loads the standard library, httpx and what httpx
needs, and nothing of the ledger's server (a workflow's environment gets no FastAPI,
SQLAlchemy or Textual from it)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support.distributions import dependency_closure

ROOT = Path(__file__).resolve().parents[2]
# httpx's extras, which it imports when they happen to be installed: brotli, zstd, http2,
# socks, and its command line's (click, rich, pygments: the ledger's own environment has them).
HTTPX_OPTIONAL = {
    "brotli", "brotlicffi", "zstandard", "h2", "hpack", "hyperframe", "socksio",
    "click", "rich", "pygments",
}  # fmt: skip


def modules_after(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def foreign(loaded: list[str]) -> set[str]:
    """What of ``loaded`` is neither the client, the standard library nor httpx's."""
    ours = {m for m in loaded if m.split(".")[0] == "flowledger"}
    server = {m for m in ours if m != "flowledger" and not m.startswith("flowledger.client")}
    allowed = dependency_closure("httpx")
    owners = importlib.metadata.packages_distributions()
    return server | {
        top
        for top in {m.split(".")[0] for m in loaded}
        if top not in sys.stdlib_module_names
        and top not in ("flowledger", "__main__", "_distutils_hack")
        and top not in HTTPX_OPTIONAL
        and not {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(top, [top])} & allowed
    }


def test_importing_the_client_loads_only_the_standard_library_and_httpx() -> None:
    assert foreign(modules_after("import flowledger.client")) == set()


def test_the_check_sees_the_servers_modules_when_they_are_loaded() -> None:
    found = foreign(modules_after("import flowledger.client, flowledger.domain.hashing, fastapi"))
    assert {"flowledger.domain.hashing", "fastapi", "pydantic"} <= found
