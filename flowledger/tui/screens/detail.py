"""One hold and the operation behind it: every field, attempts, receipts, linked executions
(with a link to the tool's own page), other holds, the dispatches it turned away, and the
event timeline."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Header, Static

from flowledger.domain import Reason, is_overdue
from flowledger.domain.display import counted
from flowledger.storage.reads import event_log as events
from flowledger.storage.reads import execution_copies as copies
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records as queries
from flowledger.tui.context import Context
from flowledger.tui.format import age, text, when
from flowledger.tui.keys import KeysFooter
from flowledger.tui.screens import sections
from flowledger.tui.screens.actions import DECISION_BINDINGS, UPDATE_BINDINGS, HoldActions


class DetailScreen(HoldActions):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        *DECISION_BINDINGS,
        *UPDATE_BINDINGS,
    ]

    def __init__(self, ctx: Context, hold_id: int) -> None:
        super().__init__(ctx)
        self.hold_id = hold_id
        self.hold: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="detail-hold")
            yield Static("", id="detail-operation")
            yield Static("", id="detail-attempts")
            yield Static("", id="detail-receipts")
            yield Static("", id="detail-executions")
            yield Static("", id="detail-holds")
            yield Static("", id="detail-turned")
            yield Static("", id="detail-events")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    def selected_hold(self) -> dict[str, Any] | None:
        if self.hold is None or self.hold["resolved_at"] is not None:
            return None
        return self.hold

    def after_action(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="detail")
    def load(self) -> None:
        store = self.ctx.store
        hold = holds.hold(store, self.hold_id)
        detail = (
            queries.operation_detail(store, hold["operation_id"])
            if hold and hold["operation_id"]
            else None
        )
        links = copies.source_urls(store)
        turned = operations.turned_away(store, hold["operation_id"]) if hold and detail else []
        notes = events.hold_notes(store, hold["id"], hold["operation_id"]) if hold else []
        if detail is None and hold is not None and hold["execution_id"]:
            # A hold about an execution alone (stuck, failed): show that execution.
            executions = copies.executions_by_ref(store, [hold["execution_id"]], hold["source"])
            self.app.call_from_thread(self._show_executions, executions, links)
        self.app.call_from_thread(self._show, hold, detail, links, turned, notes)

    def _show(
        self,
        hold: dict[str, Any] | None,
        detail: queries.OperationDetail | None,
        links: sections.Links,
        turned: list[dict[str, Any]],
        notes: list[dict[str, Any]],
    ) -> None:
        self.hold = hold
        self.refresh_bindings()
        now = self.ctx.now()
        if hold is None:
            self.query_one("#detail-hold", Static).update(f"No hold {self.hold_id}.")
            return
        self.query_one("#detail-hold", Static).update(self._hold_panel(hold, now, notes))
        for section in ("operation", "attempts", "receipts", "holds", "turned", "events"):
            self.query_one(f"#detail-{section}", Static).display = detail is not None
        # Here only when it has some: the operation's own screen always lists them.
        self.query_one("#detail-turned", Static).display = bool(turned)
        if detail is None:
            return
        self.query_one("#detail-operation", Static).update(
            sections.operation_fields(detail.operation)
        )
        self.query_one("#detail-attempts", Static).update(sections.attempts(detail.attempts))
        self.query_one("#detail-receipts", Static).update(sections.receipts(detail.receipts))
        self._show_executions(detail.executions, links)
        self.query_one("#detail-holds", Static).update(sections.holds(detail.holds))
        self.query_one("#detail-turned", Static).update(sections.turned_away(turned))
        self.query_one("#detail-events", Static).update(sections.timeline(detail.events))

    def _show_executions(self, executions: list[dict[str, Any]], links: sections.Links) -> None:
        self.query_one("#detail-executions", Static).update(sections.executions(executions, links))

    def _hold_panel(self, h: dict[str, Any], now: datetime, notes: list[dict[str, Any]]) -> Table:
        status = (
            text(f"resolved: {h['resolution']} by {h['resolved_by']} at {when(h['resolved_at'])}")
            if h["resolved_at"]
            else Text("OVERDUE", style="bold red")
            if is_overdue(h["deadline"], now)
            else Text("open", style="bold yellow")
        )
        table = sections.table(f"Hold {h['id']}", ["field", "value"])
        table.add_row("status", status)
        table.add_row("reason", h["reason"] + (" (blocking)" if h["blocking"] else ""))
        table.add_row("detail", text(h["detail"]))
        if h["reason"] == Reason.DUPLICATE_TRIGGER.value:
            table.add_row("count", f"{counted(h['occurrences'], 'twin')} of this workflow that day")
        elif h["reason"] == Reason.STALE_WORKFLOW_VERSION.value:
            table.add_row("count", f"{counted(h['occurrences'], 'execution')} of this pair")
        table.add_row("opened", f"{when(h['opened_at'])} UTC ({age(h['opened_at'], now)} ago)")
        table.add_row("deadline", f"{when(h['deadline'])} UTC")
        table.add_row("owner", text(h["owner"]))
        table.add_row("next action", text(h["next_action"]))
        table.add_row("execution", text(h["execution_id"]))
        table.add_row("source", text(h["source"]))
        for n, ev in enumerate(notes):
            table.add_row("notes" if n == 0 else "", _note(ev))
        return table


# What each kind of event with a note did to the hold, as its notes list says it.
NOTED = {
    "hold_assigned": "assigned to {owner}",
    "hold_extended": "deadline to {deadline}",
    "hold_resolved": "resolved: {resolution}",
}


def _note(ev: dict[str, Any]) -> Text:
    """``2026-11-02 14:05 operator:alice: she has access (assigned to carol)``."""
    data = ev["data"]
    did = NOTED.get(ev["kind"], "").format_map(defaultdict(lambda: "-", data))
    if ev["kind"] == "hold_noted" and data.get("next_action"):
        did = f"next action: {data['next_action']}"
    line = Text(f"{when(ev['at'])[:16]} ").append_text(text(ev["actor"]))
    line.append_text(text(f": {data['note']}"))
    return line.append_text(text(f" ({did})")) if did else line
