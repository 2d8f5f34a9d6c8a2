"""The core stays pure: the domain imports no database, web, HTTP, scheduler or UI library,
and reads no clock."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import ledger.domain

FORBIDDEN = ("sqlalchemy", "sqlmodel", "fastapi", "httpx", "apscheduler", "textual", "starlette")
DOMAIN = sorted(f"ledger.domain.{m.name}" for m in pkgutil.iter_modules(ledger.domain.__path__))


@pytest.mark.parametrize("module", ["ledger.domain", *DOMAIN])
def test_core_imports_no_io_library(module: str) -> None:
    code = (
        f"import sys, {module}; bad = [m for m in sys.modules "
        f"if m.split('.')[0] in {FORBIDDEN!r}]; print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""


@pytest.mark.parametrize("module", DOMAIN)
def test_domain_reads_no_clock(module: str) -> None:
    source = inspect.getsource(importlib.import_module(module))
    assert "datetime.now" not in source and "time.time" not in source
