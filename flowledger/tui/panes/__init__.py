"""The lists on the main screen, a module each, and the paged list they share
(:mod:`flowledger.tui.panes.listing`). Each says what was picked in it with a message; none
knows the screen it is on.

The tabs, in order, are listed here once: the app binds their keys and hands them to the main
screen, the command palette offers them and the help lists them. A tab is added here."""

from __future__ import annotations

from flowledger.tui.panes.events import EventsPane
from flowledger.tui.panes.executions import ExecutionsPane
from flowledger.tui.panes.operations import OperationsPane
from flowledger.tui.panes.queue import QueuePane
from flowledger.tui.panes.sources import SourcesPane
from flowledger.tui.tabs import Tab

TABS = (
    Tab("queue", "Queue", "1", QueuePane),
    Tab("executions", "Executions", "2", ExecutionsPane),
    Tab("sources", "Sources", "3", SourcesPane),
    Tab("events", "Events", "4", EventsPane),
    Tab("operations", "Operations", "5", OperationsPane),
)

__all__ = ["TABS"]
