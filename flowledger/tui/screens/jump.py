"""The jump to an operation by its id, from anywhere: a dialog that lists the ids matching what
is typed, and the command palette's search of ids."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.command import Hit, Hits, Provider
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static

from flowledger.domain.display import visible
from flowledger.storage.reads import operation_pages as operations
from flowledger.tui.context import Context
from flowledger.tui.format import text
from flowledger.tui.messages import OpenOperation, Report

JUMP_LIMIT = 10  # ids listed as you type: enough to pick from, few enough to fit 80x24


class JumpDialog(ModalScreen[str | None]):
    """Type an operation id (or its beginning): the ids that match are listed as you type,
    ``down`` / ``up`` move through them while the typing stays in the field, and ``enter``
    opens the one picked, else the exact id, or the only one that starts so. A click on an
    id opens it too."""

    BINDINGS = [
        Binding("escape", "cancel", "Back"),
        Binding("down", "move(1)", "Next", show=False),
        Binding("up", "move(-1)", "Previous", show=False),
    ]

    def __init__(self, ctx: Context, typed: str = "") -> None:
        super().__init__()
        self.ctx = ctx
        self.typed = typed
        self.matches: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Go to operation", classes="dialog-title")
            yield Input(value=self.typed, placeholder="operation id or its beginning", id="jump")
            yield Static("", id="jump-note", classes="dialog-preview")
            matches = OptionList(id="jump-matches", compact=True)
            matches.can_focus = False  # the typing stays in the field; the arrows move here
            yield matches

    def on_mount(self) -> None:
        if self.typed:
            self._look_up(self.typed)

    @property
    def listed(self) -> OptionList:
        return self.query_one("#jump-matches", OptionList)

    @on(Input.Changed, "#jump")
    def _typed(self, event: Input.Changed) -> None:
        self._look_up(event.value)

    @work(thread=True, exclusive=True, group="jump")
    def _look_up(self, typed: str) -> None:
        found = operations.find_operation_ids(self.ctx.store, typed, limit=JUMP_LIMIT)
        self.app.call_from_thread(self._found, typed, found)

    def _found(self, typed: str, found: list[str]) -> None:
        if typed != self.query_one("#jump", Input).value:
            return  # typing went on
        note = self.query_one("#jump-note", Static)
        if found != self.matches:
            self.matches = found
            self.listed.clear_options()
            self.listed.add_options([text(operation_id) for operation_id in found])
        if not typed.strip():
            note.update("")
        elif not found:
            note.update(text(f"No operation id starts with {typed.strip()}", style="red"))
        elif len(found) == 1:
            note.update("enter opens it")
        else:
            more = "+" if len(found) >= JUMP_LIMIT else ""
            note.update(
                f"{len(found)}{more} ids start with this: down / up picks one, enter opens it"
            )

    def action_move(self, step: int) -> None:
        listed = self.listed
        if listed.option_count:
            index = listed.highlighted
            start = -1 if step > 0 else listed.option_count
            listed.highlighted = min(max((start if index is None else index) + step, 0),
                                     listed.option_count - 1)  # fmt: skip

    @on(OptionList.OptionSelected, "#jump-matches")
    def _clicked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.matches[event.option_index])

    @on(Input.Submitted, "#jump")
    def _submitted(self) -> None:
        index = self.listed.highlighted
        if index is not None and index < len(self.matches):
            self.dismiss(self.matches[index])
        else:
            self._resolve(self.query_one("#jump", Input).value)

    @work(thread=True, exclusive=True, group="jump")
    def _resolve(self, typed: str) -> None:
        found = operations.find_operation_ids(self.ctx.store, typed, limit=JUMP_LIMIT)
        if found and (found[0] == typed.strip() or len(found) == 1):
            self.app.call_from_thread(self.dismiss, found[0])
            return
        self.app.call_from_thread(self._found, typed, found)
        if found:
            note = "Several operation ids start with this: pick one with down / up, or type more."
            self.post_message(Report(note, "warning"))

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
                partial(app.post_message, OpenOperation(operation_id)),
                help="Open the operation: its holds, attempts and turned-away dispatches",
            )
