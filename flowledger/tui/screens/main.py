"""The main screen: the tabs it is handed (the attention queue first, then executions,
sources, the event log and every operation). What is picked in a list opens through the app
(the list posts it); the tab's own keys run on its pane."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, TabbedContent, TabPane

from flowledger.tui.context import Context
from flowledger.tui.keys import KeysFooter
from flowledger.tui.messages import ListShown
from flowledger.tui.screens.actions import DECISION_BINDINGS, UPDATE_BINDINGS, HoldActions
from flowledger.tui.tabs import Pane, Tab


class MainScreen(HoldActions):
    BINDINGS = [
        # The footer shows them in this order, as many as fit beside the global keys.
        *DECISION_BINDINGS,
        Binding("slash", "pane('filter')", "Filter"),
        *UPDATE_BINDINGS,
        Binding("s", "pane('sort')", "Sort"),
        Binding("S", "pane('reverse')", "Reverse sort", show=False),
        Binding("v", "pane('verify')", "Verify"),
    ]

    def __init__(self, ctx: Context, tabs: Sequence[Tab]) -> None:
        super().__init__(ctx)
        self.tabs = tabs

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial=f"tab-{self.tabs[0].name}"):
            for tab in self.tabs:
                with TabPane(f"{tab.title} [{tab.key}]", id=f"tab-{tab.name}"):
                    yield tab.pane(self.ctx, id=tab.name)
        yield KeysFooter()

    def active(self) -> str:
        return str(self.query_one(TabbedContent).active).removeprefix("tab-")

    def pane(self, name: str | None = None) -> Pane:
        """The pane of tab ``name``, or of the tab shown."""
        return self.query_one(f"#{name or self.active()}", Pane)

    def on_mount(self) -> None:
        self.pane(self.tabs[0].name).query_one(DataTable).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("hold_action", "refused"):
            return self.pane().HOLDS and super().check_action(action, parameters)
        if action == "pane":
            return self.has_action(str(parameters[0]))
        return True

    def has_action(self, name: str) -> bool:
        """Whether the tab shown has its own action ``name`` (``filter``: a filter)."""
        return callable(getattr(self.pane(), f"action_{name}", None))

    async def action_pane(self, name: str) -> None:
        await self.app.run_action(name, self.pane())

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_bindings()

    def action_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"tab-{name}"
        self.pane(name).query_one(DataTable).focus()

    def selected_hold(self) -> dict[str, Any] | None:
        pane = self.pane()
        return pane.current() if pane.HOLDS else None

    def refresh_lists(self) -> None:
        for pane in self.query(Pane):
            pane.reload()

    @on(ListShown)
    def _first_shown(self, event: ListShown) -> None:
        if event.pane.id != self.tabs[0].name:
            return

        # The first tab is what a person looks at first; the others load once it is painted.
        def load_the_rest() -> None:
            for pane in self.query(Pane):
                pane.load_if_never_loaded()

        self.call_after_refresh(load_the_rest)

    @on(DataTable.RowHighlighted)
    def _selection_moved(self) -> None:
        self.refresh_bindings()  # the footer offers what the selected hold allows
