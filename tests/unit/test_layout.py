"""The layout holds: one top-level package, small modules, and SQL only in ``flowledger.storage``.

The import contracts (``[tool.importlinter]``, run by ``test_boundaries``) say who may import
the database libraries and that no package forms a cycle; this module checks what they cannot
see: the size of each module, SQL written as text, and what the wheel installs.
"""

from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path

import pytest

from tests.support.wheel import build_wheel

ROOT = Path(__file__).resolve().parents[2]
CODE = ("flowledger", "bench", "e2e")
MIGRATIONS = ROOT / "flowledger" / "storage" / "migrations"
STORAGE = ROOT / "flowledger" / "storage"
MAX_LINES = 400
# `make mutate` runs the unit tests in its copy of the tree, whose mutated modules are longer.
pytestmark = pytest.mark.skipif(ROOT.name == "mutants", reason="a mutated copy of the tree")

# A string that starts like a statement, or reads like one in the middle of a longer text.
STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|TRIGGER)"
    r"|DROP\s+(TABLE|INDEX|TRIGGER)|ALTER\s+TABLE|ANALYZE|VACUUM|PRAGMA|WITH\s+\w+\s+AS)\b"
    r"|\bSELECT\b.+\bFROM\b|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b",
    re.DOTALL,
)


def _modules(*folders: str) -> list[Path]:
    found = []
    for folder in folders:
        found += [p for p in (ROOT / folder).rglob("*.py") if MIGRATIONS not in p.parents]
    return sorted(found)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (prose may quote a statement)."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _sql_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [
        node.value.strip().splitlines()[0][:80]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and STATEMENT.search(node.value)
    ]


@pytest.mark.parametrize("path", _modules(*CODE), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_the_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


def test_sql_is_written_only_in_storage() -> None:
    outside = [p for p in _modules("flowledger") if STORAGE not in p.parents]
    found = {str(p.relative_to(ROOT)): s for p in outside if (s := _sql_strings(p))}
    assert found == {}


def test_the_sql_check_sees_statements(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(
        'X = "SELECT id FROM holds WHERE resolved_at IS NULL"\nY = "the operations table"\n',
        encoding="utf-8",
    )
    assert _sql_strings(path) == ["SELECT id FROM holds WHERE resolved_at IS NULL"]


def test_nothing_outside_storage_imports_sqlite3() -> None:
    importers = []
    for path in _modules("flowledger"):
        if STORAGE in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.split(".")[0] == "sqlite3" for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"flowledger"}
    assert "flowledger/storage/migrations/env.py" in names
    assert "flowledger/storage/migrations/script.py.mako" in names
    assert "flowledger/tui/flowledger.tcss" in names
    assert "flowledger/n8n/templates/guarded-write.json" in names
    assert any(n.startswith("flowledger/storage/migrations/versions/0001") for n in names)
