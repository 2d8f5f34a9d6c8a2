"""A person's decisions on a hold, as the UI offers them: which values each asks for, what the
confirmation says, and which service call records it. Which decisions a hold allows is the
domain's rule (:func:`flowledger.domain.allowed`): only those are offered, and a key for another
is explained before any dialog opens. A refusal from the services (a race lost to someone
else) is shown and changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding

from flowledger.domain import (
    DECISIONS,
    IllegalTransition,
    OpenHold,
    Reason,
    State,
    allowed,
    refusal,
)
from flowledger.services.ledger import InvalidInput, NotFound
from flowledger.tui.context import Context
from flowledger.tui.dialogs import ConfirmDialog, Field, FormDialog
from flowledger.tui.format import deadline_forms, new_deadline, text, when
from flowledger.tui.keys import TypingGuard
from flowledger.tui.messages import HoldActedOn, Report

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
        "",
        "confirmed with evidence",
    ),
    "release": ActionSpec("Release for retry", [NOTE], "", "released for retry"),
    "cancel": ActionSpec("Cancel the operation", [NOTE], "", "cancelled"),
    "dismiss": ActionSpec("Dismiss the hold", [NOTE], "", "dismissed"),
    "assign": ActionSpec(
        "Assign",
        [Field("owner", "Owner", placeholder="who handles it"), NOTE],
        "The hold is assigned to {owner}.",
        "assigned to {owner}",
    ),
    "extend": ActionSpec(
        "Extend the deadline",
        [Field("deadline", "New deadline"), NOTE],  # its forms: from the clock, when asked
        "The hold's deadline moves later, from {current_text} to {deadline_text} UTC.",
        "deadline is now {deadline_text} UTC",
    ),
    "note": ActionSpec(
        "Add a note",
        [NOTE, Field("next_action", "Next action", required=False, placeholder="what comes next")],
        "The note is added to the hold's record.",
        "has the note",
    ),
}
# Whatever the hold's reason, a person can always assign it, move its deadline or note it.
UPDATES = ("assign", "extend", "note")

KEYS = {
    "confirm": ("c", "Confirm"),
    "release": ("r", "Release"),
    "cancel": ("x", "Cancel"),
    "dismiss": ("d", "Dismiss"),
    "assign": ("a", "Assign"),
    "extend": ("e", "Extend"),
    "note": ("n", "Note"),
}
# Each key twice: the action when the selected hold allows it (shown in the footer), else the
# explanation why not (never shown; the key still answers).
# A screen lists these in its bindings: the footer shows its actions in that order, as many as
# fit beside the global keys (flowledger.tui.keys), so the decisions come first, then the
# updates (``?`` lists every key).
DECISION_BINDINGS = [Binding(KEYS[n][0], f"hold_action('{n}')", KEYS[n][1]) for n in DECISIONS]
UPDATE_BINDINGS = [
    *(Binding(KEYS[n][0], f"hold_action('{n}')", KEYS[n][1]) for n in UPDATES),
    *(Binding(key, f"refused('{name}')", label, show=False) for name, (key, label) in KEYS.items()),
]


def subject(hold: dict[str, Any]) -> tuple[OpenHold, str | None, State | None, bool]:
    state = hold.get("operation_state")
    return (
        OpenHold(hold["id"], Reason(hold["reason"]), bool(hold["blocking"]), hold["cause_key"]),
        hold.get("operation_id"),
        State(state) if state else None,
        bool(hold.get("operation_conflict")),
    )


def offered(hold: dict[str, Any]) -> tuple[str, ...]:
    """What the UI offers for an open hold (a queue or detail row): the decisions the domain
    allows, then the updates."""
    return (*allowed(*subject(hold)), *UPDATES)


def why_not(name: str, hold: dict[str, Any]) -> str | None:
    """The domain's reason ``name`` cannot be taken on ``hold``, or ``None`` when it can."""
    if name not in DECISIONS:
        return None
    refused = refusal(name, *subject(hold))
    return str(refused) if refused is not None else None


def consequence(name: str, hold: dict[str, Any], values: dict[str, str]) -> str:
    """What will really happen to ``hold`` and its operation: the confirmation's text."""
    op, state = hold.get("operation_id"), text(hold.get("operation_state"))
    overdue = " Any overdue hold about it closes with it."
    if name == "confirm":
        if hold["reason"] == Reason.RECEIPT_CONFLICT.value:
            becomes = (
                "stays CONFIRMED, with this receipt"
                if hold.get("operation_state") == State.CONFIRMED.value
                else "becomes CONFIRMED with it"
            )
            return (
                f"Receipt {values['receipt']!r} stands for operation {op} (now {state}): the "
                f"operation {becomes}, and its receipt_conflict holds close. "
                "Workflows will skip this write from now on." + overdue
            )
        return (
            f"Operation {op} (now {state}) becomes CONFIRMED with receipt "
            f"{values['receipt']!r}, and its unknown-outcome holds close. Workflows will skip "
            "this write from now on. Only confirm if you saw the effect in the target system."
            + overdue
        )
    if name == "release":
        return (
            f"Operation {op} goes back to PREPARED and its unknown-outcome holds close: the "
            "workflow will be allowed to WRITE AGAIN. If your evidence is wrong and the first "
            "write did happen, the write will happen TWICE (a duplicate effect)." + overdue
        )
    if name == "cancel":
        return _cancelling(hold, op, state) + overdue
    if name == "dismiss":
        stays = f"operation {op} stays {state}" if op else "nothing else changes"
        return f"Hold {hold['id']} closes as seen; {stays}." + overdue
    return ACTIONS[name].warning.format(**values)


def _cancelling(hold: dict[str, Any], op: str | None, state: Text) -> str:
    """What cancelling says: that it stops later dispatches, and what it cannot undo."""
    stops = (
        f"Operation {op} (now {state}) becomes CANCELLED for good: a workflow that dispatches "
        "it again is turned away, and all its open holds close. This cannot be undone."
    )
    if hold.get("operation_state") == State.CONFIRMED.value:
        return (
            f"Operation {op} was CONFIRMED: its write ALREADY HAPPENED, possibly TWICE (the "
            "receipt conflict: two different receipts came back). Cancelling undoes nothing "
            "in the target system; check there and undo a duplicate yourself. " + stops
        )
    if hold.get("operation_state") == State.DISPATCHING.value:
        return (
            f"Operation {op} may already have been written (its outcome is unknown): "
            "cancelling undoes nothing in the target system. " + stops
        )
    return stops


def describe(hold: dict[str, Any]) -> Text:
    subject = hold.get("operation_id") or f"source {hold.get('source') or '-'}"
    blocking = ", blocking" if hold.get("blocking") else ""
    return (
        text(f"Hold {hold['id']} ({hold['reason']}{blocking}) on {subject}")
        .append(f"\nOpened {when(hold.get('opened_at'))}, due {when(hold.get('deadline'))}; ")
        .append_text(text(f"owner {hold.get('owner') or '-'}"))
    )


class HoldActions(TypingGuard):
    """A screen that can name the hold under the cursor, and offers what it allows. What an
    action did is said in a :class:`Report`; once it ran, :class:`HoldActedOn` lets the app
    reload every list."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx

    def selected_hold(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def after_action(self) -> None:
        """Reload what this screen shows beyond the lists (the app reloads those)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "hold_action":
            hold = self.selected_hold()
            if self.ctx.read_only or hold is None:
                return False
            return parameters[0] in offered(hold)
        return True

    def action_hold_action(self, name: str) -> None:
        hold = self.selected_hold()
        if self.ctx.read_only or hold is None or name not in offered(hold):
            self.action_refused(name)
            return
        self._run_action(name, hold)

    def action_refused(self, name: str) -> None:
        """Say why the key for ``name`` does nothing here; no dialog opens."""
        title = ACTIONS[name].title
        hold = self.selected_hold()
        if self.ctx.read_only:
            said = f"{title}: read-only mode, no action is offered."
        elif hold is None:
            said = f"{title}: no open hold selected."
        else:
            reason = why_not(name, hold) or "not offered here"
            said = f"{title} is not possible for hold {hold['id']}: {reason}."
        self.post_message(Report(said, "warning"))

    @work(exclusive=True, group="hold-action")
    async def _run_action(self, name: str, hold: dict[str, Any]) -> None:
        spec = ACTIONS[name]
        ctx = self.ctx
        fields = [_checked(f, hold, ctx.now) for f in spec.fields]
        values = await self.app.push_screen_wait(FormDialog(spec.title, describe(hold), fields))
        if values is None:
            return
        if name == "extend":
            now = ctx.now()
            try:  # read once: the time confirmed is the time recorded
                deadline, by = new_deadline(values["deadline"], hold["deadline"], now)
            except ValueError as exc:  # the clock passed it while the dialog was open
                self.post_message(Report(f"Nothing changed: {exc}", "error"))
                return
            values["deadline"] = deadline.isoformat()
            # Counted from the deadline by the services, unless it is counted from now.
            counted = by is not None and hold["deadline"] > now
            values["extend_by"] = str(by.total_seconds()) if counted and by else ""
            values["deadline_text"] = when(deadline)
            values["current_text"] = when(hold["deadline"])
        message = consequence(name, hold, values) + f"\n\nRecorded as operator {ctx.operator}."
        if not await self.app.push_screen_wait(ConfirmDialog(f"{spec.title}?", message)):
            self.post_message(Report("Nothing changed.", "information"))
            return
        call = _service_call(ctx, name, hold["id"], values)
        try:
            await asyncio.to_thread(call)
        except IllegalTransition as exc:
            if exc.code == "already_resolved":
                said = Report(f"Someone else got there first: {exc}. Nothing changed.", "error")
            else:
                said = Report(f"Refused, nothing changed: {exc}", "error")
        except (InvalidInput, NotFound) as exc:
            said = Report(f"Refused, nothing changed: {exc}", "error")
        else:
            said = Report(f"Hold {hold['id']} {spec.done.format(**values)}.")
        self.post_message(said)
        self.after_action()
        self.post_message(HoldActedOn(hold["id"]))


def _checked(f: Field, hold: dict[str, Any], now: Callable[[], datetime]) -> Field:
    """The deadline field reads what is typed against the hold's deadline and the clock,
    live; its example is a time still to come."""
    if f.name != "deadline":
        return f

    def check(typed: str) -> str:
        at = now()
        deadline, by = new_deadline(typed, hold["deadline"], at)
        if by is None:
            return f"→ {when(deadline)} UTC (was {when(hold['deadline'])} UTC)"
        since = "the current deadline" if hold["deadline"] > at else "now: the deadline has passed"
        return f"→ {when(deadline)} UTC ({typed.strip()} from {since})"

    return replace(f, placeholder=deadline_forms(now()), check=check)


def _service_call(ctx: Context, name: str, hold_id: int, v: dict[str, str]) -> Callable[[], Any]:
    ledger, op, note = ctx.ledger, ctx.operator, v.get("note", "")
    if name in ("confirm", "release", "cancel", "dismiss"):
        receipt = v.get("receipt") or None
        return lambda: ledger.resolve(hold_id, name, note=note, operator=op, receipt=receipt).run()
    if name == "assign":
        return lambda: ledger.update_hold(hold_id, operator=op, note=note, owner=v["owner"]).run()
    if name == "extend":
        # A relative extension is counted by the services from the deadline as they find it.
        by = timedelta(seconds=float(v["extend_by"])) if v["extend_by"] else None
        until = None if by else datetime.fromisoformat(v["deadline"])
        return lambda: ledger.update_hold(
            hold_id, operator=op, note=note, deadline=until, extend_by=by
        ).run()
    next_action = v.get("next_action") or None
    return lambda: ledger.update_hold(
        hold_id, operator=op, note=note, next_action=next_action
    ).run()
