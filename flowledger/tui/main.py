"""The main screen: the attention queue first, then executions, sources, the event log and
every operation. Enter opens the selected row in full."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, TabbedContent, TabPane

from flowledger.tui.actions import DECISION_BINDINGS, UPDATE_BINDINGS, HoldActions
from flowledger.tui.detail import DetailScreen
from flowledger.tui.keys import KeysFooter
from flowledger.tui.operations import OperationScreen
from flowledger.tui.panes.events import EventsPane
from flowledger.tui.panes.executions import ExecutionsPane
from flowledger.tui.panes.listing import ListPane
from flowledger.tui.panes.operations import OperationsPane
from flowledger.tui.panes.queue import QueuePane
from flowledger.tui.panes.sources import SourcesPane
from flowledger.tui.records import EventScreen, ExecutionScreen
from flowledger.tui.tabs import TABS


class MainScreen(HoldActions):
    BINDINGS = [
        *(Binding(tab.key, f"tab('{tab.name}')", tab.title, show=False) for tab in TABS),
        # The footer shows them in this order, as many as fit beside the global keys.
        *DECISION_BINDINGS,
        Binding("slash", "filter", "Filter"),
        *UPDATE_BINDINGS,
        Binding("s", "sort", "Sort"),
        Binding("S", "reverse", "Reverse sort", show=False),
        Binding("v", "verify", "Verify"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial=f"tab-{TABS[0].name}"):
            for tab in TABS:
                with TabPane(f"{tab.title} [{tab.key}]", id=f"tab-{tab.name}"):
                    yield tab.pane(self.ctx, id=tab.name)
        yield KeysFooter()

    @property
    def queue(self) -> QueuePane:
        return self.query_one(QueuePane)

    def active(self) -> str:
        return str(self.query_one(TabbedContent).active).removeprefix("tab-")

    def on_mount(self) -> None:
        self.queue.table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("hold_action", "refused"):
            return self.active() == "queue" and super().check_action(action, parameters)
        if action in ("sort", "reverse"):
            return self.active() == "queue"
        if action == "verify":
            return self.active() == "events"
        if action == "filter":
            return self.has_filter()
        return True

    def has_filter(self) -> bool:
        return isinstance(self.query_one(f"#{self.active()}"), ListPane)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_bindings()
        events = self.query_one(EventsPane)
        if self.active() == "events" and events.verified is None and not events.verifying:
            events.verify(announce=False)  # once on first look; `v` walks the chain again

    def action_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = f"tab-{name}"
        pane = self.query_one(f"#{name}")
        pane.query_one(DataTable).focus()

    def action_filter(self) -> None:
        pane = self.query_one(f"#{self.active()}")
        if isinstance(pane, ListPane):
            pane.focus_filter()

    def action_sort(self) -> None:
        self.queue.next_sort()

    def action_reverse(self) -> None:
        self.queue.set_sort(self.queue.sort, not self.queue.descending)

    def action_verify(self) -> None:
        self.query_one(EventsPane).verify()

    def selected_hold(self) -> dict[str, Any] | None:
        return self.queue.current() if self.active() == "queue" else None

    def refresh_lists(self) -> None:
        for pane in self.query(ListPane):
            pane.reload()
        self.query_one(SourcesPane).reload()

    @on(ListPane.FirstShown, "#queue")
    def _queue_shown(self) -> None:
        # The queue is what a person looks at first; the other tabs load once it is painted.
        def load_the_rest() -> None:
            for pane in self.query(ListPane):
                pane.load_if_never_loaded()
            self.query_one(SourcesPane).load_if_never_loaded()

        self.call_after_refresh(load_the_rest)

    @on(DataTable.RowHighlighted, "#queue DataTable")
    def _selection_moved(self) -> None:
        self.refresh_bindings()  # the footer offers what the selected hold allows

    @on(DataTable.RowSelected, "#queue DataTable")
    def _open(self, event: DataTable.RowSelected) -> None:
        hold = self.queue.current()
        if hold is not None:
            self.app.push_screen(DetailScreen(self.ctx, hold["id"]))

    @on(DataTable.RowSelected, "#operations DataTable")
    def _open_operation(self) -> None:
        row = self.query_one(OperationsPane).current()
        if row is not None:
            self.app.push_screen(OperationScreen(self.ctx, row["operation_id"]))

    @on(DataTable.RowSelected, "#events DataTable")
    def _open_event(self) -> None:
        row = self.query_one(EventsPane).current()
        if row is not None:
            self.app.push_screen(EventScreen(row))

    @on(DataTable.RowSelected, "#executions DataTable")
    def _open_execution(self) -> None:
        row = self.query_one(ExecutionsPane).current()
        if row is not None:
            self.app.push_screen(ExecutionScreen(self.ctx, row))
