"""One row of a list opened in full: an event with all its data, and an execution with the
link to the tool's own page and the dispatches it made."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from flowledger.storage.reads import execution_copies as executions
from flowledger.tui.context import Context
from flowledger.tui.format import execution_url, text, when
from flowledger.tui.screens import sections

CHAIN_FIELDS = ["seq", "prev_hash", "hash"]
EXECUTION_FIELDS = [
    "source",
    "external_id",
    "workflow_id",
    "workflow_name",
    "status",
    "final",
    "mode",
    "started_at",
    "stopped_at",
    "retry_of",
    "first_seen_at",
    "last_seen_at",
    "gone_at",
]


def _record(title: str, row: dict[str, Any], keys: list[str]) -> Table:
    fields = sections.table(title, ["field", "value"])
    for key in keys:
        if key in row:
            fields.add_row(key, sections.value(key, row[key]))
    return fields


class RecordScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "close", "Close")]

    def action_close(self) -> None:
        self.dismiss(None)


class EventScreen(RecordScreen):
    """An event as recorded: every field and its whole data, indented."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__()
        self.event = event

    def compose(self) -> ComposeResult:
        ev = self.event
        with VerticalScroll(classes="dialog wide", id="event-detail"):
            yield Label(f"Event {ev['seq']}: {ev['kind']}", classes="dialog-title")
            yield Static(_event_summary(ev), id="event-summary")
            yield Static(sections.pretty_data(ev["data"]), id="event-data")
            yield Static(_record("Its place in the chain", ev, CHAIN_FIELDS), id="event-fields")


def _event_summary(ev: dict[str, Any]) -> Text:
    line = Text(f"at {when(ev['at'])} UTC by ").append_text(text(ev["actor"]))
    if ev["operation_id"]:
        line.append("\noperation ").append_text(text(ev["operation_id"]))
    if ev["hold_id"] is not None:
        line.append(f"\nhold {ev['hold_id']}")
    return line


class ExecutionScreen(RecordScreen):
    """An execution's kept copy, the tool's page for it as a terminal hyperlink, and the
    dispatches it made."""

    def __init__(self, ctx: Context, execution: dict[str, Any]) -> None:
        super().__init__()
        self.ctx = ctx
        self.execution = execution

    def compose(self) -> ComposeResult:
        e = self.execution
        with VerticalScroll(classes="dialog wide", id="execution-detail"):
            title = text(f"Execution {e['external_id']} ({e['source']})")
            yield Label(title, classes="dialog-title")
            yield Static("", id="execution-link")
            yield Static(_record("", e, EXECUTION_FIELDS))
            yield Static("loading…", id="execution-attempts")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="execution")
    def load(self) -> None:
        store = self.ctx.store
        e = self.execution
        kind, base = executions.source_urls(store).get(e["source"], (None, None))
        url = execution_url(kind, base, e)
        made = executions.attempts_by_execution(store, e["external_id"], e["source"])
        self.app.call_from_thread(self._show, url, made)

    def _show(self, url: str | None, made: list[dict[str, Any]]) -> None:
        link = self.query_one("#execution-link", Static)
        if url:
            link.update(sections.link(url, style="underline"))
        else:
            link.update(Text("no link: the source has no base URL", style="dim"))
        dispatches = sections.table(
            "Dispatches it made", ["operation", "attempt", "outcome", "dispatched", "state now"]
        )
        for a in made:
            dispatches.add_row(
                text(a["operation_id"]),
                str(a["number"]),
                a["outcome"],
                when(a["dispatched_at"]),
                a["operation_state"],
            )
        if not made:
            dispatches.add_row("-", "", "none recorded", "", "")
        self.query_one("#execution-attempts", Static).update(dispatches)
