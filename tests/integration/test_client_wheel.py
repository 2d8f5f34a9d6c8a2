"""``flowledger-client`` installs alone: its wheel holds the client and nothing of the server,
requires httpx only, and guards a write in an interpreter that sees the wheel and httpx's own
dependencies, and nothing else of this environment (no site-packages, no checkout)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

from tests.support.wheel import ROOT, build_client_wheel
from tests.unit.test_client_alone import dependency_closure

SCRIPT = """
import sys, httpx
from flowledger.client import Ledger
import flowledger
assert flowledger.__file__ is None, flowledger.__file__  # a namespace: the wheel's, alone
def answer(request):
    if request.url.path.endswith("/dispatch"):
        return httpx.Response(200, json={"decision": "go", "attempt": 1})
    return httpx.Response(200, json={"state": "confirmed", "receipt": "msg-1"})
ledger = Ledger("http://ledger.test", token="t", transport=httpx.MockTransport(answer))
with ledger.guard("invoice:INV-1:send", input={"a": 1}, version="v1", execution_id="e") as g:
    assert g.go
    g.confirm("msg-1")
server = sorted(m for m in sys.modules if m.split(".")[0] in
                {"fastapi", "starlette", "sqlalchemy", "sqlmodel", "pydantic", "textual"})
print("guarded", server)
"""


def httpx_only(lib: Path) -> None:
    """Links in ``lib`` to the top-level modules of httpx and of what it requires."""
    wanted = dependency_closure("httpx")
    for top, dists in importlib.metadata.packages_distributions().items():
        if not {re.sub(r"[-_.]+", "-", d).lower() for d in dists} & wanted:
            continue
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin is None or top.startswith("_"):
            continue
        origin = Path(spec.origin)
        source = origin.parent if spec.submodule_search_locations else origin
        (lib / source.name).symlink_to(source)


def test_the_client_wheel_holds_the_client_alone_and_requires_httpx_only(tmp_path: Path) -> None:
    wheel = build_client_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    code = [n for n in names if not n.startswith("flowledger_client-")]
    assert code and all(n.startswith("flowledger/client/") for n in code)
    assert sorted(code) == sorted(
        f"flowledger/client/{p.name}" for p in (ROOT / "flowledger" / "client").glob("*.py")
    )
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in names if n.endswith("METADATA")]
        text = archive.read(metadata).decode()
    requires = [
        Requirement(line.split(":", 1)[1])
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert [r.name for r in requires] == ["httpx"]
    assert any(s.operator == "<" for s in requires[0].specifier)


def test_the_client_wheel_guards_a_write_beside_httpx_alone(tmp_path: Path) -> None:
    wheel = build_client_wheel(tmp_path)
    unpacked = tmp_path / "wheel"
    zipfile.ZipFile(wheel).extractall(unpacked)
    lib = tmp_path / "lib"
    lib.mkdir()
    httpx_only(lib)
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path[:0] = {[str(unpacked), str(lib)]!r}\n{SCRIPT}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "guarded []"
