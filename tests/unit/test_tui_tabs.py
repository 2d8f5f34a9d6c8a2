"""A tab is listed once (flowledger.tui.panes.TABS): the keys the app binds and the help
follow it."""

from __future__ import annotations

from textual.binding import Binding

from flowledger.tui.app import FlowledgerApp
from flowledger.tui.panes import TABS
from flowledger.tui.screens.dialogs import help_text


def test_every_tab_has_its_own_key() -> None:
    bound = {b.key: b.action for b in FlowledgerApp.BINDINGS if isinstance(b, Binding)}
    assert len({tab.key for tab in TABS}) == len(TABS)
    for tab in TABS:
        assert bound[tab.key] == f"tab('{tab.name}')"


def test_the_help_names_every_tab_with_its_key() -> None:
    (row,) = [line for line in help_text(TABS).splitlines() if "queue, executions" in line]
    for tab in TABS:
        assert f"`{tab.key}`" in row and tab.name in row
