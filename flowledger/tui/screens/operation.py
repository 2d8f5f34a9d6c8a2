"""One operation's own screen: its record, attempts, holds, linked executions, the dispatches
it turned away and its timeline (the Operations tab is :mod:`flowledger.tui.panes.operations`;
the jump to an id, :mod:`flowledger.tui.screens.jump`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from flowledger.storage.reads import execution_copies as executions
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records as queries
from flowledger.tui.context import Context
from flowledger.tui.format import STATE_STYLES, age, text
from flowledger.tui.keys import KeysFooter
from flowledger.tui.messages import OpenHold
from flowledger.tui.screens import sections


class OperationScreen(Screen[None]):
    """One operation and everything about it. ``h`` opens its first open hold, where the
    decisions are."""

    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("h", "open_hold", "Open hold"),
    ]

    def __init__(self, ctx: Context, operation_id: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.operation_id = operation_id
        self.detail: queries.OperationDetail | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="op-summary")
            parts = (
                "holds", "twins", "versions", "turned", "attempts", "executions", "retries",
                "receipts", "operation",
            )  # fmt: skip
            for part in parts:
                yield Static("", id=f"op-{part}")
            yield Static("", id="op-events")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load()

    def open_holds(self) -> list[dict[str, Any]]:
        if self.detail is None:
            return []
        return [h for h in self.detail.holds if h["resolved_at"] is None]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_hold":
            return bool(self.open_holds())
        return True

    def action_open_hold(self) -> None:
        held = self.open_holds()
        if held:
            self.post_message(OpenHold(held[0]["id"]))

    @work(thread=True, exclusive=True, group="operation")
    def load(self) -> None:
        store = self.ctx.store
        detail = queries.operation_detail(store, self.operation_id)
        turned = operations.turned_away(store, self.operation_id) if detail else []
        links = executions.source_urls(store)
        self.app.call_from_thread(self._show, detail, turned, links)

    def _show(
        self,
        detail: queries.OperationDetail | None,
        turned: list[dict[str, Any]],
        links: sections.Links,
    ) -> None:
        self.detail = detail
        self.refresh_bindings()
        if detail is None:
            self.query_one("#op-summary", Static).update(text(f"No operation {self.operation_id}."))
            return
        parts: dict[str, RenderableType] = {
            "summary": _summary(detail.operation, self.ctx.now()),
            "operation": sections.operation_fields(detail.operation),
            "holds": sections.holds(detail.holds),
            "twins": sections.twins(detail.events),
            "versions": sections.stale_versions(detail.events),
            "turned": sections.turned_away(turned),
            "attempts": sections.attempts(detail.attempts),
            "executions": sections.executions(detail.executions, links),
            "retries": sections.retries(detail.retries),
            "receipts": sections.receipts(detail.receipts),
            "events": sections.timeline(detail.events),
        }
        for part, renderable in parts.items():
            self.query_one(f"#op-{part}", Static).update(renderable)
        self.query_one("#op-retries", Static).display = bool(detail.retries)
        # Only an operation a workflow was started twice for has them, and only one an
        # outdated version dispatched has the other.
        kinds = {ev["kind"] for ev in detail.events}
        self.query_one("#op-twins", Static).display = "twin_trigger" in kinds
        self.query_one("#op-versions", Static).display = "stale_workflow_version" in kinds


def _summary(op: dict[str, Any], now: datetime) -> Text:
    """The operation in two lines, above the parts that explain it."""
    line = text(op["operation_id"], style="bold").append("\n")
    line.append(op["state"].upper(), style=STATE_STYLES.get(op["state"], "bold"))
    line.append(f", attempt {op['attempt']} of {op['max_attempts']}")
    if op["execution_id"]:
        line.append_text(text(f", last execution {op['execution_id']}"))
    if op["workflow_id"]:
        line.append_text(text(f" ({op['workflow_id']})"))
    line.append_text(text(f", receipt {op['receipt']}") if op["receipt"] else Text(", no receipt"))
    line.append(
        f"; changed {age(op['updated_at'], now)} ago, created {age(op['created_at'], now)} ago"
    )
    return line
