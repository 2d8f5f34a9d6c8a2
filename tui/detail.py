"""One hold and the operation behind it: every field, attempts, receipts, linked executions
(with a link to the tool's own page), other holds, and the event timeline."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from ledger.domain import is_overdue
from ledger.domain.display import visible
from ledger.reads import duty, queries
from tui.actions import DECISION_BINDINGS, HELP_BINDING, UPDATE_BINDINGS, HoldActions
from tui.format import age, execution_url, short_hash, text, when

if TYPE_CHECKING:
    from tui.app import FlowledgerApp

OPERATION_FIELDS = [
    "operation_id",
    "state",
    "attempt",
    "max_attempts",
    "input_hash",
    "processing_version",
    "approval_version",
    "approval_expires_at",
    "receipt",
    "execution_id",
    "run_index",
    "workflow_id",
    "step",
    "source",
    "input_ref",
    "deadline",
    "version",
    "created_at",
    "updated_at",
]


def _value(key: str, value: Any) -> str | Text:
    if isinstance(value, datetime):
        return when(value) + " UTC"
    if key == "input_hash":
        return short_hash(value)
    return text(value)


def _table(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", expand=True, show_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    if columns == ["field", "value"]:  # a record: narrow names, wide values
        table.columns[0].width = 20
        table.columns[1].ratio = 1
    return table


class DetailScreen(HoldActions, Screen[None]):
    BINDINGS = [
        *DECISION_BINDINGS,
        Binding("escape,q", "app.pop_screen", "Back"),
        HELP_BINDING,
        *UPDATE_BINDINGS,
    ]
    app: FlowledgerApp

    def __init__(self, hold_id: int) -> None:
        super().__init__()
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
            yield Static("", id="detail-events")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.load()

    def selected_hold(self) -> dict[str, Any] | None:
        if self.hold is None or self.hold["resolved_at"] is not None:
            return None
        return self.hold

    def after_action(self) -> None:
        self.load()
        self.app.refresh_lists()

    @work(thread=True, exclusive=True, group="detail")
    def load(self) -> None:
        store = self.app.ctx.store
        hold = duty.hold(store, self.hold_id)
        detail = (
            queries.operation_detail(store, hold["operation_id"])
            if hold and hold["operation_id"]
            else None
        )
        links = duty.source_urls(store)
        if detail is None and hold is not None and hold["execution_id"]:
            # A hold about an execution alone (stuck, failed): show that execution.
            executions = duty.executions_by_ref(store, [hold["execution_id"]], hold["source"])
            self.app.call_from_thread(self._show_executions, executions, links)
        self.app.call_from_thread(self._show, hold, detail, links)

    def _show(
        self,
        hold: dict[str, Any] | None,
        detail: queries.OperationDetail | None,
        links: dict[str, tuple[str, str | None]],
    ) -> None:
        self.hold = hold
        self.refresh_bindings()
        now = self.app.ctx.now()
        if hold is None:
            self.query_one("#detail-hold", Static).update(f"No hold {self.hold_id}.")
            return
        self.query_one("#detail-hold", Static).update(self._hold_panel(hold, now))
        for section in ("operation", "attempts", "receipts", "holds", "events"):
            self.query_one(f"#detail-{section}", Static).display = detail is not None
        if detail is None:
            return
        op = detail.operation
        fields = _table(escape(visible(f"Operation {op['operation_id']}")), ["field", "value"])
        for key in OPERATION_FIELDS:
            fields.add_row(key, _value(key, op.get(key)))
        self.query_one("#detail-operation", Static).update(fields)

        attempts = _table("Attempts", ["#", "outcome", "execution", "dispatched", "ended", "error"])
        for a in detail.attempts:
            attempts.add_row(
                str(a["number"]),
                a["outcome"],
                text(a["execution_id"]),
                when(a["dispatched_at"]),
                when(a["ended_at"]),
                text(a["error"]),
            )
        self.query_one("#detail-attempts", Static).update(attempts)

        receipts = _table("Receipts", ["receipt", "kind", "attempt", "by", "at", "detail"])
        for r in detail.receipts:
            receipts.add_row(
                text(r["receipt"]),
                r["kind"],
                str(r["attempt"]),
                text(r["confirmed_by"]),
                when(r["confirmed_at"]),
                text(r["detail"]),
            )
        self.query_one("#detail-receipts", Static).update(receipts)

        self._show_executions(detail.executions, links)

        holds = _table("Holds", ["hold", "reason", "opened", "deadline", "owner", "resolution"])
        for h in detail.holds:
            resolution = (
                text(f"{h['resolution']} by {h['resolved_by']} at {when(h['resolved_at'])}")
                if h["resolved_at"]
                else "OPEN"
            )
            holds.add_row(
                str(h["id"]),
                h["reason"] + (" (blocking)" if h["blocking"] else ""),
                when(h["opened_at"]),
                when(h["deadline"]),
                text(h["owner"]),
                resolution,
            )
        self.query_one("#detail-holds", Static).update(holds)

        events = _table("Event timeline", ["seq", "at", "actor", "kind", "hold", "data"])
        for ev in detail.events:
            events.add_row(
                str(ev["seq"]),
                when(ev["at"]),
                text(ev["actor"]),
                ev["kind"],
                text(ev["hold_id"]),
                text(json.dumps(ev["data"], sort_keys=True)),
            )
        self.query_one("#detail-events", Static).update(events)

    def _show_executions(
        self, executions: list[dict[str, Any]], links: dict[str, tuple[str, str | None]]
    ) -> None:
        execs = _table(
            "Linked executions", ["source", "execution", "status", "started", "stopped", "gone at"]
        )
        for e in executions:
            kind, base = links.get(e["source"], (None, None))
            url = execution_url(kind, base, e)
            ident = text(e["external_id"], style=f"underline link {url}" if url else "")
            execs.add_row(
                text(e["source"]),
                ident,
                text(e["status"]),
                when(e["started_at"]),
                when(e["stopped_at"]),
                Text(when(e["gone_at"]), style="yellow") if e["gone_at"] else "-",
            )
            if url:
                execs.add_row("", text(url, style=f"dim link {url}"), "", "", "", "")
        self.query_one("#detail-executions", Static).update(execs)

    def _hold_panel(self, h: dict[str, Any], now: datetime) -> Table:
        status = (
            text(f"resolved: {h['resolution']} by {h['resolved_by']} at {when(h['resolved_at'])}")
            if h["resolved_at"]
            else Text("OVERDUE", style="bold red")
            if is_overdue(h["deadline"], now)
            else Text("open", style="bold yellow")
        )
        table = _table(f"Hold {h['id']}", ["field", "value"])
        table.add_row("status", status)
        table.add_row("reason", h["reason"] + (" (blocking)" if h["blocking"] else ""))
        table.add_row("detail", text(h["detail"]))
        table.add_row("opened", f"{when(h['opened_at'])} UTC ({age(h['opened_at'], now)} ago)")
        table.add_row("deadline", f"{when(h['deadline'])} UTC")
        table.add_row("owner", text(h["owner"]))
        table.add_row("next action", text(h["next_action"]))
        table.add_row("execution", text(h["execution_id"]))
        table.add_row("source", text(h["source"]))
        if h["resolution_note"]:
            table.add_row("resolution note", text(h["resolution_note"]))
        return table
