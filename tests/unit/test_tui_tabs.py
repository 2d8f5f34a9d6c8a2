"""A tab is listed once (flowledger.tui.tabs): the main screen's keys and the help follow it."""

from __future__ import annotations

from textual.binding import Binding

from flowledger.tui.dialogs import HELP
from flowledger.tui.main import MainScreen
from flowledger.tui.tabs import TABS


def test_every_tab_has_its_own_key_on_the_main_screen() -> None:
    bound = {b.key: b.action for b in MainScreen.BINDINGS if isinstance(b, Binding)}
    assert len({tab.key for tab in TABS}) == len(TABS)
    for tab in TABS:
        assert bound[tab.key] == f"tab('{tab.name}')"


def test_the_help_names_every_tab_with_its_key() -> None:
    (row,) = [line for line in HELP.splitlines() if "queue, executions" in line]
    for tab in TABS:
        assert f"`{tab.key}`" in row and tab.name in row
