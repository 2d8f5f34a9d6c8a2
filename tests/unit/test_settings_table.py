"""Every environment variable the code reads is in docs/settings.md's tables: the ones
``Settings`` reads (``FLOWLEDGER_`` and a field's name) and every ``FLOWLEDGER_…`` named in the
code, the tests' and benchmarks' own included."""

from __future__ import annotations

import re
from pathlib import Path

from flowledger.config import Settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"(?<![A-Z0-9_])FLOWLEDGER_[A-Z0-9_]*[A-Z0-9]")  # not REPLACE_WITH_FLOWLEDGER_…


def documented() -> set[str]:
    """The names in the first column of the settings tables; ``FLOWLEDGER_CRASH_AT``,
    ``_SIGNAL`` stands for ``FLOWLEDGER_CRASH_SIGNAL`` too."""
    tables = (ROOT / "docs" / "settings.md").read_text()
    names: set[str] = set()
    for line in tables.splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        full = NAME.findall(cell)
        names.update(full)
        if full:
            stem = full[0].rsplit("_", 1)[0]
            names.update(stem + short for short in re.findall(r"`(_[A-Z0-9_]+)`", cell))
    return names


def named_in_code() -> set[str]:
    names: set[str] = set()
    for folder in ("flowledger", "bench", "e2e", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(NAME.findall(path.read_text()))
    # A prefix matched as a whole (startswith("FLOWLEDGER_CRASH")) is not a variable.
    return {n for n in names if not any(o != n and o.startswith(n + "_") for o in names)}


def test_every_environment_variable_is_in_the_settings_table() -> None:
    read_by_settings = {"FLOWLEDGER_" + name.upper() for name in Settings.model_fields}
    missing = (read_by_settings | named_in_code()) - documented()
    assert not missing, f"not in docs/settings.md: {sorted(missing)}"


def test_the_table_is_read_as_written() -> None:
    assert {"FLOWLEDGER_DB", "FLOWLEDGER_CRASH_SIGNAL", "FLOWLEDGER_E2E_KEEP"} <= documented()
