"""A person's decisions on a hold, as the UI offers them: the keys, and the form each asks
for. What an action is called, what its confirmation says, why one is refused and the service
call that records it are shared with ``flowledger hold`` and the API
(:mod:`flowledger.services.actions`). Which decisions a hold allows is the domain's rule
(:func:`flowledger.domain.allowed`): only those are offered, and a key for another is explained
before any dialog opens. A refusal from the services (a race lost to someone else) is shown
and changes nothing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

from rich.text import Text
from textual import work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from flowledger.domain import DECISIONS
from flowledger.domain.display import visible
from flowledger.services import actions as shared
from flowledger.services.actions import UPDATES, Values, offered, subject, why_not
from flowledger.tui.context import Context
from flowledger.tui.format import deadline_forms, future_deadline, new_deadline, text, when
from flowledger.tui.messages import HoldActedOn, Report
from flowledger.tui.screens.dialogs import ConfirmDialog, Field, FormDialog

_log = logging.getLogger(__name__)

__all__ = ["ACTIONS", "KEYS", "HoldActions", "offered", "subject", "why_not"]

NOTE = Field("note", "Note (why; what you saw)", placeholder="e.g. found it in the target's log")


@dataclass(frozen=True)
class ActionSpec:
    """An action as the UI asks for it: its title (:data:`flowledger.services.actions.ACTIONS`)
    and the form's fields."""

    title: str
    fields: list[Field]
    done: str


_FIELDS: dict[str, list[Field]] = {
    "confirm": [
        Field("receipt", "Receipt (the target's reference)", placeholder="e.g. msg-123"),
        NOTE,
    ],
    "reapprove": [
        Field("version", "Approved version", required=False, placeholder="its processing version"),
        Field("expires_at", "Approved until", required=False, placeholder="no expiry"),
        NOTE,
    ],
    "assign": [Field("owner", "Owner", placeholder="who handles it"), NOTE],
    "extend": [Field("deadline", "New deadline"), NOTE],  # its forms: from the clock, when asked
    "note": [
        NOTE,
        Field("next_action", "Next action", required=False, placeholder="what comes next"),
    ],
}
ACTIONS: dict[str, ActionSpec] = {
    name: ActionSpec(action.title, _FIELDS.get(name, [NOTE]), action.done)
    for name, action in shared.ACTIONS.items()
}

KEYS = {
    "confirm": ("c", "Confirm"),
    "release": ("r", "Release"),
    "cancel": ("x", "Cancel"),
    "dismiss": ("d", "Dismiss"),
    "reapprove": ("p", "Approve"),
    "allow-attempt": ("m", "One more"),
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


def describe(hold: dict[str, Any]) -> Text:
    subject = hold.get("operation_id") or f"source {hold.get('source') or '-'}"
    blocking = ", blocking" if hold.get("blocking") else ""
    return (
        text(f"Hold {hold['id']} ({hold['reason']}{blocking}) on {subject}")
        .append(f"\nOpened {when(hold.get('opened_at'))}, due {when(hold.get('deadline'))}; ")
        .append_text(text(f"owner {hold.get('owner') or '-'}"))
    )


class HoldActions(Screen[None]):
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

    def commands(self) -> Iterable[SystemCommand]:
        """For the command palette: what the selected hold allows, each with its key."""
        hold = self.selected_hold()
        if hold is None:
            return
        for name in offered(hold):
            yield SystemCommand(
                f"{ACTIONS[name].title} (key {KEYS[name][0]})",
                f"On hold {hold['id']}",
                partial(self.action_hold_action, name),
            )

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
            said = shared.refused(name, hold) or (
                f"{title} is not possible for hold {hold['id']}: not offered here."
            )
        self.post_message(Report(said, "warning"))

    @work(exclusive=True, group="hold-action")
    async def _run_action(self, name: str, hold: dict[str, Any]) -> None:
        spec = ACTIONS[name]
        ctx = self.ctx
        fields = [_checked(f, hold, ctx.now) for f in spec.fields]
        if name == "release" and shared.why_no_retry(hold, hold.get("execution_status")) is None:
            fields.insert(-1, _retry_field(hold))
        typed = await self.app.push_screen_wait(FormDialog(spec.title, describe(hold), fields))
        if typed is None:
            return
        try:  # read once: the time confirmed is the time recorded
            values = _values(typed, hold, ctx.now())
        except ValueError as exc:  # the clock passed it while the dialog was open
            self.post_message(Report(f"Nothing changed: {exc}", "error"))
            return
        message = shared.consequence(name, hold, values)
        message += f"\n\nIt will be recorded under operator {ctx.operator}."
        if not await self.app.push_screen_wait(ConfirmDialog(f"{spec.title}?", message)):
            self.post_message(Report("Nothing changed.", "information"))
            return
        try:
            call = shared.call(ctx.ledger, name, hold["id"], ctx.operator, values)
            await asyncio.to_thread(call.run)
        except shared.REFUSALS as exc:
            said = Report(shared.failure(exc), "error")
        except Exception as exc:  # the database gone, a disk full: said, the UI stays open
            _log.exception("hold %s %s failed", hold["id"], name)
            said = Report(
                f"The ledger could not record it ({type(exc).__name__}: {visible(str(exc))[:200]})."
                " Whether it was recorded is not known: look at the hold before trying again.",
                "error",
            )
        else:
            asked = (
                f" The retry of execution {hold.get('execution_id')} is asked: the scheduler"
                " asks n8n (or run flowledger act --once)."
                if values.retry
                else ""
            )
            said = Report(f"Hold {hold['id']} {shared.done(name, values, ctx.operator)}.{asked}")
        self.post_message(said)
        self.after_action()
        self.post_message(HoldActedOn(hold["id"]))


def _retry_field(hold: dict[str, Any]) -> Field:
    """Release's offer to retry the hold's failed execution in n8n too (yes or no)."""

    def check(typed: str) -> str:
        answer = typed.strip().lower()
        if answer in ("", "n", "no"):
            return "→ no retry: the next execution of the workflow writes"
        if answer in ("y", "yes"):
            return f"→ n8n runs execution {hold.get('execution_id')} again after the release"
        raise ValueError("yes or no")

    label = f"Also retry execution {hold.get('execution_id')} in n8n? (yes or no)"
    return Field("retry", label, required=False, placeholder="no", check=check)


def _checked(f: Field, hold: dict[str, Any], now: Callable[[], datetime]) -> Field:
    """A time field reads what is typed against the clock (the deadline against the hold's
    deadline too), live; its example is a time still to come."""
    if f.name == "expires_at":
        return replace(f, check=lambda v: f"→ {when(future_deadline(v, now()))} UTC")
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


def _values(typed: dict[str, str], hold: dict[str, Any], now: datetime) -> Values:
    """The form's text as the action's values; its times read against ``now``, a new
    deadline against the hold's (``+2h`` is counted by the services from the deadline as
    they find it, unless that has passed)."""
    deadline, by = (
        new_deadline(typed["deadline"], hold["deadline"], now)
        if typed.get("deadline")
        else (None, None)
    )
    expires = typed.get("expires_at")
    return Values(
        note=typed.get("note", ""),
        receipt=typed.get("receipt") or None,
        owner=typed.get("owner") or None,
        deadline=deadline,
        extend_by=by if by is not None and hold["deadline"] > now else None,
        next_action=typed.get("next_action") or None,
        version=typed.get("version") or None,
        expires_at=future_deadline(expires, now) if expires else None,
        retry=typed.get("retry", "").strip().lower() in ("y", "yes"),
    )
