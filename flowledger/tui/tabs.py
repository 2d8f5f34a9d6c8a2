"""The main screen's tabs, in order. The screen composes them and binds their keys, the
command palette offers them and the help lists them, all from here: a tab is added here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from textual.widget import Widget

from flowledger.tui.context import Context
from flowledger.tui.panes.events import EventsPane
from flowledger.tui.panes.executions import ExecutionsPane
from flowledger.tui.panes.operations import OperationsPane
from flowledger.tui.panes.queue import QueuePane
from flowledger.tui.panes.sources import SourcesPane


class Pane(Protocol):
    def __call__(self, ctx: Context, *, id: str) -> Widget: ...


@dataclass(frozen=True)
class Tab:
    name: str  # its pane's id (the tab's own is ``tab-<name>``)
    title: str
    key: str
    pane: Pane


TABS = (
    Tab("queue", "Queue", "1", QueuePane),
    Tab("executions", "Executions", "2", ExecutionsPane),
    Tab("sources", "Sources", "3", SourcesPane),
    Tab("events", "Events", "4", EventsPane),
    Tab("operations", "Operations", "5", OperationsPane),
)
