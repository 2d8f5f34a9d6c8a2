"""The core stays pure: the domain imports no database, web, HTTP, scheduler or UI library."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("sqlalchemy", "sqlmodel", "fastapi", "httpx", "apscheduler", "textual", "starlette")


@pytest.mark.parametrize("module", ["ledger.domain", "ledger.hashing", "ledger.sweep_rules"])
def test_core_imports_no_io_library(module: str) -> None:
    code = (
        f"import sys, {module}; bad = [m for m in sys.modules "
        f"if m.split('.')[0] in {FORBIDDEN!r}]; print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


@pytest.mark.parametrize("part", ["model", "rules", "resolutions"])
def test_domain_reads_no_clock(part: str) -> None:
    import importlib
    import inspect
    import pkgutil

    import ledger.domain

    assert {m.name for m in pkgutil.iter_modules(ledger.domain.__path__)} == {
        "model",
        "rules",
        "resolutions",
    }  # a new module joins the parametrisation
    source = inspect.getsource(importlib.import_module(f"ledger.domain.{part}"))
    assert "datetime.now" not in source and "time.time" not in source
