"""Every operation: the Operations tab (most recently changed first, filtered by state and
text), one operation's own screen (its record, attempts, holds, linked executions, the
dispatches it turned away and its timeline), and the jump to an operation id from anywhere."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Header, Input, Label, Static

from flowledger.domain.display import visible
from flowledger.queries import duty, operations
from flowledger.queries import records as queries
from flowledger.tui import sections
from flowledger.tui.format import age, middle, text
from flowledger.tui.listing import Cell, ListPane, Searched

if TYPE_CHECKING:
    from flowledger.tui.app import FlowledgerApp

COUNT_FOR_SECONDS = 60.0
STATE_STYLES = {"dispatching": "bold yellow", "failed": "red", "cancelled": "dim"}


class OperationsPane(ListPane):
    """Every operation, most recently changed first, with its open holds."""

    COLUMNS = [
        ("operation", "operation"),
        ("state", "state"),
        ("attempt", "att"),
        ("execution", "last exec"),
        ("receipt", "receipt"),
        ("holds", "holds"),
        ("changed", "changed"),
        ("age", "age"),
    ]
    FILTER_HINT = "/ filter: a state (dispatching, state:failed) and words (id, execution, receipt)"
    NEWEST_FIRST = True
    # The operation takes what is left; narrower screens drop the time of the last change
    # first, then the receipt, the age and the last execution.
    WIDTHS = {
        "state": 11,
        "attempt": 4,
        "execution": 10,
        "receipt": 14,
        "holds": 5,
        "changed": 7,
        "age": 6,
    }
    FLEX = ("operation", 24, 60)
    DROP = ("changed", "receipt", "age", "execution")

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self._counted_for: tuple[str, float, int | None] = ("", -COUNT_FOR_SECONDS, None)

    def _filter(self) -> operations.OperationFilter:
        return operations.OperationFilter.parse(self.filter_text)

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        # Words are searched a window of each state's operations at a time, as the queue's
        # filters are.
        found = operations.search_operations(
            self.ctx.store,
            flt=self._filter(),
            after=operations.After(after["updated_at"], after["operation_id"]) if after else None,
            limit=limit,
            window=self.window(after),
        )
        return Searched(found.rows, found.resume, found.read)

    def count(self) -> int | None:
        # Counting ten million rows takes a while: a refresh reuses a recent count of the
        # same filter rather than repeating it every few seconds.
        now = time.monotonic()
        text, at, total = self._counted_for
        if text != self.filter_text or now - at > COUNT_FOR_SECONDS:
            total = operations.count_operations(self.ctx.store, flt=self._filter())
            self._counted_for = (self.filter_text, now, total)
        return total

    def key(self, row: dict[str, Any]) -> str:
        return str(row["operation_id"])

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        now = self.ctx.now()
        held = row["open_holds"]
        return [
            Text(middle(row["operation_id"], self.widths["operation"])),
            Text(row["state"], style=STATE_STYLES.get(row["state"], "")),
            f"{row['attempt']}/{row['max_attempts']}",
            Text(middle(row["execution_id"] or "-", self.widths["execution"])),
            Text(middle(row["receipt"] or "-", self.widths["receipt"])),
            Text(str(held), style="bold yellow") if held else "-",
            age(row["updated_at"], now),
            age(row["created_at"], now),
        ]


class OperationScreen(Screen[None]):
    """One operation and everything about it. ``h`` opens its first open hold, where the
    decisions are."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("h", "open_hold", "Open hold"),
        Binding("question_mark", "app.help", "Help"),
    ]
    app: FlowledgerApp

    def __init__(self, operation_id: str) -> None:
        super().__init__()
        self.operation_id = operation_id
        self.detail: queries.OperationDetail | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="op-summary")
            for part in ("holds", "turned", "attempts", "executions", "receipts", "operation"):
                yield Static("", id=f"op-{part}")
            yield Static("", id="op-events")
        yield Footer(compact=True)

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
        from flowledger.tui.detail import DetailScreen  # the hold's screen opens operations in turn

        held = self.open_holds()
        if held:
            self.app.push_screen(DetailScreen(held[0]["id"]))

    @work(thread=True, exclusive=True, group="operation")
    def load(self) -> None:
        store = self.app.ctx.store
        detail = queries.operation_detail(store, self.operation_id)
        turned = operations.turned_away(store, self.operation_id) if detail else []
        links = duty.source_urls(store)
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
            "summary": _summary(detail.operation, self.app.ctx.now()),
            "operation": sections.operation_fields(detail.operation),
            "holds": sections.holds(detail.holds),
            "turned": sections.turned_away(turned),
            "attempts": sections.attempts(detail.attempts),
            "executions": sections.executions(detail.executions, links),
            "receipts": sections.receipts(detail.receipts),
            "events": sections.timeline(detail.events),
        }
        for part, renderable in parts.items():
            self.query_one(f"#op-{part}", Static).update(renderable)


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


class JumpDialog(ModalScreen[str | None]):
    """Type an operation id (or its beginning): the ids that match show as you type; enter
    opens the exact one, or the only one that starts so."""

    BINDINGS = [Binding("escape", "cancel", "Back")]
    app: FlowledgerApp

    def __init__(self, typed: str = "") -> None:
        super().__init__()
        self.typed = typed
        self.matches: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Go to operation", classes="dialog-title")
            yield Input(value=self.typed, placeholder="operation id or its beginning", id="jump")
            yield Static("", id="jump-matches", classes="dialog-preview")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Open", variant="primary", id="ok")
                yield Button("Back", id="back")

    def on_mount(self) -> None:
        if self.typed:
            self._look_up(self.typed)

    @on(Input.Changed, "#jump")
    def _typed(self, event: Input.Changed) -> None:
        self._look_up(event.value)

    @work(thread=True, exclusive=True, group="jump")
    def _look_up(self, typed: str) -> None:
        found = operations.find_operation_ids(self.app.ctx.store, typed)
        self.app.call_from_thread(self._found, typed, found)

    def _found(self, typed: str, found: list[str]) -> None:
        if typed != self.query_one("#jump", Input).value:
            return  # typing went on
        self.matches = found
        shown = self.query_one("#jump-matches", Static)
        if not typed.strip():
            shown.update("")
        elif not found:
            shown.update(text(f"No operation id starts with {typed.strip()}", style="red"))
        else:
            shown.update(text("\n".join(found)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._open()
        else:
            self.dismiss(None)

    @on(Input.Submitted, "#jump")
    def _submitted(self) -> None:
        self._open()

    def _open(self) -> None:
        self._resolve(self.query_one("#jump", Input).value)

    @work(thread=True, exclusive=True, group="jump")
    def _resolve(self, typed: str) -> None:
        found = operations.find_operation_ids(self.app.ctx.store, typed)
        if found and (found[0] == typed.strip() or len(found) == 1):
            self.app.call_from_thread(self.dismiss, found[0])
            return
        self.app.call_from_thread(self._found, typed, found)
        if found:
            note = "Several operations start so: type more, or the whole id."
            self.app.call_from_thread(self.app.report, note, "warning")

    def action_cancel(self) -> None:
        self.dismiss(None)


class OperationIds(Provider):
    """The command palette finds operations by the beginning of their id (the primary key's
    order, so a lookup per keystroke stays cheap)."""

    async def search(self, query: str) -> Hits:
        app: Any = self.app
        if not query.strip() or not hasattr(app, "ctx"):
            return
        found = await asyncio.to_thread(operations.find_operation_ids, app.ctx.store, query)
        matcher = self.matcher(query)
        for operation_id in found:
            shown = f"Operation {operation_id}"
            yield Hit(
                max(matcher.match(shown), 0.5),
                Text(visible(shown)),
                partial(app.open_operation, operation_id),
                help="Open the operation: its holds, attempts and turned-away dispatches",
            )
