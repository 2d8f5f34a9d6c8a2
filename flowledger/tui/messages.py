"""What a screen, a list or a dialog says happened. They post these and never call the app nor
build another screen: the app decides what follows (which screen opens, a toast, which lists
to reload)."""

from __future__ import annotations

from typing import Any

from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widget import Widget


class Report(Message):
    """Something to tell the person on duty: what an action did, or why it did nothing."""

    def __init__(self, text: str, severity: SeverityLevel = "information") -> None:
        super().__init__()
        self.text = text
        self.severity = severity


class HoldActedOn(Message):
    """A person's action on a hold ran (recorded, or refused by the services): what every
    list shows may have changed."""

    def __init__(self, hold_id: int) -> None:
        super().__init__()
        self.hold_id = hold_id


class OpenHold(Message):
    """A hold was picked: its detail, and the operation behind it, should open."""

    def __init__(self, hold_id: int) -> None:
        super().__init__()
        self.hold_id = hold_id


class OpenOperation(Message):
    """An operation was picked (from its list, the jump, the command palette)."""

    def __init__(self, operation_id: str) -> None:
        super().__init__()
        self.operation_id = operation_id


class OpenEvent(Message):
    """An event of the log was picked: its whole data should open."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__()
        self.event = event


class OpenExecution(Message):
    """An execution was picked: its copy and the tool's page for it should open."""

    def __init__(self, execution: dict[str, Any]) -> None:
        super().__init__()
        self.execution = execution


class ListShown(Message):
    """A list's first page is on screen."""

    def __init__(self, pane: Widget) -> None:
        super().__init__()
        self.pane = pane

    @property
    def control(self) -> Widget:
        return self.pane
