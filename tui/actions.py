"""A person's decisions on a hold, as the UI offers them: which values each asks for, what the
confirmation says, and which service call records it. The rules themselves live in the
services; a refusal from them (or a race lost to someone else) is shown and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.binding import Binding

from ledger.domain import IllegalTransition
from ledger.writer.services import InvalidInput, NotFound
from tui.dialogs import ConfirmDialog, Field, FormDialog
from tui.format import parse_deadline, text, when

if TYPE_CHECKING:
    from tui.app import FlowledgerApp

NOTE = Field("note", "Note (why; what you saw)", placeholder="e.g. found it in the target's log")


@dataclass(frozen=True)
class ActionSpec:
    title: str
    fields: list[Field]
    warning: str
    done: str


ACTIONS: dict[str, ActionSpec] = {
    "confirm": ActionSpec(
        "Confirm with evidence",
        [Field("receipt", "Receipt (the target's reference)", placeholder="e.g. msg-123"), NOTE],
        "The operation becomes CONFIRMED with receipt {receipt!r}. Workflows will skip this "
        "write from now on. Only confirm if you saw the effect in the target system.",
        "confirmed with evidence",
    ),
    "release": ActionSpec(
        "Release for retry",
        [NOTE],
        "The workflow will be allowed to WRITE AGAIN. If your evidence is wrong and the first "
        "write did happen, the write will happen TWICE (a duplicate effect).",
        "released for retry",
    ),
    "cancel": ActionSpec(
        "Cancel the operation",
        [NOTE],
        "The operation is CANCELLED for good: no workflow will write it again, and its open "
        "holds close. This cannot be undone.",
        "cancelled",
    ),
    "dismiss": ActionSpec(
        "Dismiss the hold",
        [NOTE],
        "The hold closes as seen; nothing about the operation changes.",
        "dismissed",
    ),
    "assign": ActionSpec(
        "Assign",
        [Field("owner", "Owner", placeholder="who handles it"), NOTE],
        "The hold is assigned to {owner}.",
        "assigned",
    ),
    "extend": ActionSpec(
        "Extend the deadline",
        [Field("deadline", "New deadline", placeholder="+30m, +2h, +1d or 2026-11-02 18:00"), NOTE],
        "The hold's deadline moves to {deadline_text} UTC.",
        "deadline extended",
    ),
    "note": ActionSpec(
        "Add a note",
        [NOTE, Field("next_action", "Next action", required=False, placeholder="what comes next")],
        "The note is added to the hold's record.",
        "noted",
    ),
}

ACTION_BINDINGS = [
    Binding("c", "hold_action('confirm')", "Confirm"),
    Binding("r", "hold_action('release')", "Release"),
    Binding("x", "hold_action('cancel')", "Cancel op"),
    Binding("d", "hold_action('dismiss')", "Dismiss"),
    Binding("a", "hold_action('assign')", "Assign"),
    Binding("e", "hold_action('extend')", "Extend"),
    Binding("n", "hold_action('note')", "Note"),
]


def describe(hold: dict[str, Any]) -> Text:
    subject = hold.get("operation_id") or f"source {hold.get('source') or '-'}"
    blocking = ", blocking" if hold.get("blocking") else ""
    return (
        text(f"Hold {hold['id']} ({hold['reason']}{blocking}) on {subject}")
        .append(f"\nOpened {when(hold.get('opened_at'))}, due {when(hold.get('deadline'))}; ")
        .append_text(text(f"owner {hold.get('owner') or '-'}"))
    )


class HoldActions:
    """Mixed into a screen that can name the hold under the cursor."""

    app: FlowledgerApp

    def selected_hold(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def after_action(self) -> None:
        """Reload what the screen shows."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "hold_action":
            return not self.app.ctx.read_only
        return True

    def action_hold_action(self, name: str) -> None:
        if self.app.ctx.read_only:
            return
        hold = self.selected_hold()
        if hold is None:
            self.app.report("No open hold selected.", "warning")
            return
        self._run_action(name, hold)

    @work(exclusive=True, group="hold-action")
    async def _run_action(self, name: str, hold: dict[str, Any]) -> None:
        spec = ACTIONS[name]
        values = await self.app.push_screen_wait(
            FormDialog(spec.title, describe(hold), spec.fields)
        )
        if values is None:
            return
        ctx = self.app.ctx
        if name == "extend":
            try:
                values["deadline_text"] = when(parse_deadline(values["deadline"], ctx.now()))
            except ValueError as exc:
                self.app.report(f"Nothing changed: {exc}", "error")
                return
        message = spec.warning.format(**values) + f"\n\nRecorded as operator {ctx.operator}."
        if not await self.app.push_screen_wait(ConfirmDialog(f"{spec.title}?", message)):
            self.app.report("Nothing changed.", "information")
            return
        call = _service_call(self.app, name, hold["id"], values)
        try:
            await asyncio.to_thread(call)
        except IllegalTransition as exc:
            if exc.code == "already_resolved":
                self.app.report(f"Someone else got there first: {exc}. Nothing changed.", "error")
            else:
                self.app.report(f"Refused, nothing changed: {exc}", "error")
        except (InvalidInput, NotFound) as exc:
            self.app.report(f"Refused, nothing changed: {exc}", "error")
        else:
            self.app.report(f"Hold {hold['id']} {spec.done} by {ctx.operator}.", "information")
        self.after_action()


def _service_call(
    app: FlowledgerApp, name: str, hold_id: int, v: dict[str, str]
) -> Callable[[], Any]:
    ctx = app.ctx
    ledger, op, note = ctx.ledger, ctx.operator, v.get("note", "")
    if name in ("confirm", "release", "cancel", "dismiss"):
        receipt = v.get("receipt") or None
        return lambda: ledger.resolve(hold_id, name, note=note, operator=op, receipt=receipt).run()
    if name == "assign":
        return lambda: ledger.update_hold(hold_id, operator=op, note=note, owner=v["owner"]).run()
    if name == "extend":
        deadline = parse_deadline(v["deadline"], ctx.now())
        return lambda: ledger.update_hold(hold_id, operator=op, note=note, deadline=deadline).run()
    next_action = v.get("next_action") or None
    return lambda: ledger.update_hold(
        hold_id, operator=op, note=note, next_action=next_action
    ).run()
