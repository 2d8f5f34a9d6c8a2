"""``flowledger --help`` answers before the ledger's heavy parts load: the database library,
the web stack, the terminal UI, HTTP, the scheduler, cryptography and the settings' models load
inside the commands that use them. (pydantic itself is not among them: typer reads some option
values through it, ``sources --db`` on the way to ``sources check --help`` for one.)"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = (
    "sqlalchemy",
    "sqlmodel",
    "fastapi",
    "textual",
    "httpx",
    "apscheduler",
    "cryptography",
    "pydantic_settings",
    "rich",
)
# Runs the command as `flowledger` does, then names the heavy packages it had loaded.
SCRIPT = """
import sys
from flowledger.cli import main
sys.argv = ["flowledger", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    code = done.code
print("exit", code)
print(sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY)))
"""


@pytest.mark.parametrize(
    "args",
    [("--help",), ("-h",), ("show", "--help"), ("hold", "-h"), ("sources", "check", "--help")],
    ids=" ".join,
)
def test_help_loads_none_of_the_heavy_parts(args: tuple[str, ...]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{SCRIPT}", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    *help_text, exit_line, loaded = done.stdout.splitlines()
    assert exit_line == "exit 0" and help_text[0].startswith("Usage: flowledger")
    assert loaded == "[]"


def test_a_command_that_reads_the_ledger_loads_the_database_library(tmp_path: object) -> None:
    """The check above can see a heavy part loaded: a real command loads one."""
    done = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{SCRIPT}", "status", "--db", "/nonexistent"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "sqlalchemy" in done.stdout.splitlines()[-1]
