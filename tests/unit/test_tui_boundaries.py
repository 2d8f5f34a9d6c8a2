"""The terminal UI holds no business rules and writes nothing itself: every change goes through
``flowledger.services.ledger.Ledger``, every read through ``flowledger.storage.reads``."""

from __future__ import annotations

import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import flowledger.storage

ROOT = Path(__file__).resolve().parents[2]
TUI = ROOT / "flowledger" / "tui"
# What the UI may import of storage: the reads, and the store it opens them on.
STORAGE_FOR_THE_UI = {"engine", "reads"}
# Table writes (``HOLDS.update(``), write transactions, the models, and chain appends.
WRITES = re.compile(
    r"\b[A-Z_]+\.(insert|update|delete)\(|engine\.begin|ledger\.models|chain\.append"
)


MODULES = sorted(p.relative_to(TUI).as_posix() for p in TUI.rglob("*.py"))
APP_IMPORT = re.compile(
    r"^\s*((from|import) flowledger\.tui\.app\b|from flowledger\.tui import .*\bapp\b)",
    re.M,
)


@pytest.mark.parametrize("module", MODULES)
def test_tui_modules_write_nothing_directly(module: str) -> None:
    source = (TUI / module).read_text(encoding="utf-8")
    assert WRITES.search(source) is None


@pytest.mark.parametrize("module", [m for m in MODULES if m not in ("__init__.py", "app.py")])
def test_screens_say_what_happened_and_never_import_the_app(module: str) -> None:
    # They post flowledger.tui.messages; the app decides what follows.
    source = (TUI / module).read_text(encoding="utf-8")
    assert APP_IMPORT.search(source) is None


def test_the_cli_loads_the_ui_library_only_for_the_tui_command() -> None:
    code = (
        "import sys, flowledger.cli; print(any(m.split('.')[0] == 'textual' for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_ui_may_import_of_storage_only_the_reads_and_the_store() -> None:
    # import-linter forbids by name: every other module of storage must be on the list, or a
    # new one would be open to the UI without anyone deciding it.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c.get("source_modules") == ["flowledger.tui"]
    ]
    storage = {m.name for m in pkgutil.iter_modules(flowledger.storage.__path__)}
    forbidden = {
        m.removeprefix("flowledger.storage.")
        for m in contract["forbidden_modules"]
        if m.startswith("flowledger.storage.")
    }
    assert storage >= STORAGE_FOR_THE_UI
    assert forbidden == storage - STORAGE_FOR_THE_UI


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith(("screens/", "panes/"))])
def test_screens_and_lists_open_no_screen_themselves(module: str) -> None:
    # They post messages.Open*; the app pushes the screen. A hold action's own form and
    # confirmation are the one exception.
    source = (TUI / module).read_text(encoding="utf-8")
    pushed = set(re.findall(r"push_screen\w*\(\s*(\w+)", source))
    assert pushed <= {"FormDialog", "ConfirmDialog"}
