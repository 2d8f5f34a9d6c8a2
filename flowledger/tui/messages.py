"""What a screen or a list says happened. They post these and never call the app: the app
decides what follows (a toast, which lists to reload)."""

from __future__ import annotations

from textual.message import Message
from textual.notifications import SeverityLevel


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
