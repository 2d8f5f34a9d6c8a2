"""The handover report on a narrow screen: its tables as lists, cell by cell, escapes kept."""

from __future__ import annotations

from flowledger.tui.screens.dialogs import tables_as_lists

REPORT = """# Handover report

| deadline | hold | operation | next action |
|---|---|---|---|
| **OVERDUE 5m** (2026-11-02 16:55 UTC) | 4 | demo:a\\|b | - |
| 2026-11-02 18:00 UTC | 7 | c:\\\\ | ring \\[them\\] |

## Sources in trouble
"""


def test_each_row_becomes_an_item_naming_its_columns() -> None:
    assert tables_as_lists(REPORT).splitlines() == [
        "# Handover report",
        "",
        # An escaped pipe stays in its cell; an empty cell ("-") is left out.
        "- deadline: **OVERDUE 5m** (2026-11-02 16:55 UTC); hold: 4; operation: demo:a\\|b",
        # An escaped backslash before a pipe: the pipe ends the cell.
        "- deadline: 2026-11-02 18:00 UTC; hold: 7; operation: c:\\\\; "
        "next action: ring \\[them\\]",
        "",
        "## Sources in trouble",
    ]
    assert tables_as_lists(REPORT).endswith("trouble\n")


def test_a_report_without_tables_is_unchanged() -> None:
    text = "# Handover report\n\n- Open holds: 0\n"
    assert tables_as_lists(text) == text
