"""The ledger uses its dependencies through their public interfaces only, and each runtime
dependency is bounded above, so that a release the suite never ran on cannot reach a fresh
install unseen."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
# Modules of a dependency that are its machinery rather than its documented interface,
# although their names carry no underscore.
INTERNAL = ("uvicorn.protocols", "uvicorn.lifespan", "uvicorn.loops", "uvicorn.supervisors")


def _requirements() -> list[Requirement]:
    """The server's, and the Python client's alone (``clients/python``)."""
    found = []
    for path in (ROOT / "pyproject.toml", ROOT / "clients" / "python" / "pyproject.toml"):
        project = tomllib.loads(path.read_text())["project"]
        found += [Requirement(text) for text in project["dependencies"]]
    return found


@pytest.mark.parametrize("requirement", _requirements(), ids=str)
def test_every_runtime_dependency_has_an_upper_bound(requirement: Requirement) -> None:
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier)


def imported_names(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def private_imports(path: Path) -> list[str]:
    """The names ``path`` imports from another project's private or internal modules."""
    found = []
    for name in imported_names(path):
        top, *rest = name.split(".")
        if top in ("flowledger", "__future__") or top in sys.stdlib_module_names:
            continue
        if any(part.startswith("_") for part in rest) or name.startswith(INTERNAL):
            found.append(name)
    return found


def test_the_ledger_imports_no_private_module_of_a_dependency() -> None:
    found = {
        str(path.relative_to(ROOT)): private
        for path in sorted((ROOT / "flowledger").rglob("*.py"))
        if (private := private_imports(path))
    }
    assert found == {}


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from uvicorn.protocols.http.httptools_impl import STATUS_LINE\n"
        "from fastapi._compat import ModelField\nimport json.encoder\n"
    )
    assert private_imports(module) == [
        "uvicorn.protocols.http.httptools_impl",
        "uvicorn.protocols.http.httptools_impl.STATUS_LINE",
        "fastapi._compat",
        "fastapi._compat.ModelField",
    ]


def test_every_dependency_the_ledger_imports_is_declared() -> None:
    """A package the code imports itself (not only through another) is one of the project's
    own dependencies, so that it is bounded too."""
    declared = {canonical(r.name) for r in _requirements()}
    providers = importlib.metadata.packages_distributions()
    imported = {
        name.split(".")[0]
        for path in (ROOT / "flowledger").rglob("*.py")
        for name in imported_names(path)
    }
    undeclared = {
        top: providers[top]
        for top in imported
        if top not in ("flowledger", "__future__")
        and top not in sys.stdlib_module_names
        and not declared & {canonical(d) for d in providers.get(top, [top])}
    }
    assert undeclared == {}


def canonical(name: str) -> str:
    return name.lower().replace("_", "-")
