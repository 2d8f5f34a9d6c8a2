"""The architecture holds: the layers in ``[tool.importlinter]`` (pyproject.toml) are kept, the
domain imports no database, web, HTTP, scheduler or UI library, and reads no clock."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import flowledger.domain

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("sqlalchemy", "sqlmodel", "fastapi", "httpx", "apscheduler", "textual", "starlette")
DOMAIN = sorted(
    f"flowledger.domain.{m.name}" for m in pkgutil.iter_modules(flowledger.domain.__path__)
)


def test_the_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize("module", ["flowledger.domain", *DOMAIN])
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
