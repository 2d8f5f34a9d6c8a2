"""Listings as a person and as ``grep`` read them: whole ids, text from the ledger shown as
it is stored, and nothing that a terminal would act on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import tables
from flowledger.cli.common import app
from tests.support.ledgers import new_ledger

LONG_ID = "invoice:" + "INV-2026-000042:" * 12 + "send"  # 204 characters, one word


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    config = tmp_path / "flowledger.toml"
    config.write_text("")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    path = str(tmp_path / "ledger.db")
    store = new_ledger(path)
    store.dispose()
    return path


def add_source(db: str, name: str, error: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO sources (name, kind, status, last_error) VALUES (?, 'n8n', 'error', ?)",
            (name, error),
        )


def test_piped_listing_keeps_every_row_on_one_line_with_its_id_whole(db: str) -> None:
    add_source(db, LONG_ID, "n8n at http://n8n.test failed with 502: " + "bad gateway " * 20)
    result = CliRunner().invoke(app, ["sources", "--db", db])
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()
    assert header.split() == [
        *("NAME", "KIND", "STATUS", "LAST", "ATTEMPT", "LAST", "SUCCESS", "LAG", "LAST", "ERROR")
    ]
    assert row.split()[:6] == [LONG_ID, "n8n", "unconfigured", "-", "-", "never"]
    assert row.endswith("failed with 502: " + "bad gateway " * 19 + "bad gateway")


def test_text_from_the_ledger_is_neither_markup_nor_terminal_control(db: str) -> None:
    add_source(db, "[bold]prod[/bold]", "boom \x1b[2J\x1b]0;owned\x07 :smile: \x9b31m\r\nnext")
    result = CliRunner().invoke(app, ["sources", "--db", db])
    assert result.exit_code == 0, result.output
    row = result.output.splitlines()[1]
    assert row.split()[0] == "[bold]prod[/bold]"
    assert row.endswith(r"boom \x1b[2J\x1b]0;owned\x07 :smile: \x9b31m\r\nnext")
    assert len(result.output.splitlines()) == 2


def test_in_a_narrow_terminal_a_long_id_folds_and_nothing_is_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tables, "_width", lambda: 30)
    text = tables.render(
        [("invoice:INV-2026-000042:send:acme", "ok", 12)],
        header=("OPERATION", "STATE", "N"),
        right={2},
    )
    assert text.splitlines() == [
        "OPERATION            STATE   N",
        "invoice:INV-2026-00  ok     12",
        "0042:send:acme",
    ]


def test_a_missing_value_is_shown_as_a_dash_and_lines_carry_no_trailing_spaces() -> None:
    text = tables.render([("a", None), ("longer", "x")], indent=2)
    assert text == "  a       -\n  longer  x"


def test_no_command_pads_columns_by_hand() -> None:
    """Every listing goes through :mod:`flowledger.cli.tables` (rich sizes the columns): no
    f-string width (``{x:<12}``), ``ljust`` or tab stops in the commands."""
    import re

    import flowledger.cli

    padded = re.compile(r"\{[^{}]*:[^{}]*[<>^]\d+[^{}]*\}|\.[lr]just\(|\.center\(|\\t")
    folder = Path(flowledger.cli.__file__).parent
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(folder.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if padded.search(line)
    ]
    assert found == []


def test_every_header_is_in_capitals_whatever_the_command_wrote() -> None:
    text = tables.render([("n8n-prod", "2026-11-02 08:00")], header=("name", "Last used"))
    assert text.splitlines()[0].split() == ["NAME", "LAST", "USED"]
