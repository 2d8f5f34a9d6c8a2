"""A person's actions on a hold, as every way in offers them (the terminal UI, ``flowledger
hold``, the API): their names, what each needs, what it will do (the words a confirmation
shows), why one is refused (the domain's words), and the one service call each is.

Which decisions a hold allows is the domain's rule (:func:`flowledger.domain.refusal`); the
services check it again inside the transaction, so a race lost to someone else is refused
with the same words. A hold here is a row as :func:`flowledger.storage.reads.hold_queue.hold` and
the queue read it (with ``operation_state`` and ``operation_conflict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flowledger import domain
from flowledger.domain import DECISIONS, IllegalTransition, OpenHold, Reason, State
from flowledger.domain.times import for_people
from flowledger.services.call import Call
from flowledger.services.holds import already_resolved
from flowledger.services.ledger import Ledger
from flowledger.services.values import InvalidInput, NotFound
from flowledger.storage.acting import execution_status
from flowledger.storage.engine import Store

# Whatever the hold's reason, a person can always assign it, move its deadline or note it.
UPDATES = ("assign", "extend", "note")
NAMES = (*DECISIONS, *UPDATES)


@dataclass(frozen=True)
class Action:
    """What an action is called, what it says once done, and the values it needs besides the
    note (``needs``) or may take (``takes``)."""

    title: str
    done: str
    needs: tuple[str, ...] = ()
    takes: tuple[str, ...] = ()


ACTIONS: dict[str, Action] = {
    "confirm": Action("Confirm with evidence", "confirmed with evidence", needs=("receipt",)),
    "release": Action("Release for retry", "released for retry"),
    "cancel": Action("Cancel the operation", "cancelled"),
    "dismiss": Action("Dismiss the hold", "dismissed"),
    "reapprove": Action("Approve again", "approved again", takes=("version", "expires_at")),
    "allow-attempt": Action("Allow another attempt", "allowed another attempt"),
    "assign": Action("Assign", "assigned", needs=("owner",)),
    "extend": Action("Extend the deadline", "deadline extended", needs=("deadline",)),
    "note": Action("Add a note", "noted", takes=("next_action",)),
}


@dataclass(frozen=True)
class Values:
    """What a person gave for an action: the note always, the rest as :class:`Action` says."""

    note: str
    receipt: str | None = None
    owner: str | None = None
    deadline: datetime | None = None
    # ``+2h``: the extension the services count from the deadline as they find it (the
    # ``deadline`` beside it is what that gives now, for the confirmation).
    extend_by: timedelta | None = None
    next_action: str | None = None
    version: str | None = None
    expires_at: datetime | None = None
    # release: ask the workflow tool to run the hold's execution again (:func:`why_no_retry`).
    retry: bool = False


# The statuses of an execution n8n can run again (its retry answers 409 to the others).
RETRYABLE_STATUSES = frozenset({"error", "crashed"})


def retry_refusal(store: Store, hold: dict[str, Any]) -> str | None:
    """:func:`why_no_retry` for ``hold``, its execution's status read from the kept copy:
    what every way in checks before a release with a retry changes anything."""
    status = None
    if (execution_id := hold.get("execution_id")) is not None:
        with store.reader.connect() as conn:
            status = execution_status(conn, hold.get("source"), execution_id)
    return why_no_retry(hold, status)


def why_no_retry(hold: dict[str, Any], execution_status: str | None) -> str | None:
    """Why releasing ``hold`` cannot also retry its execution, or ``None`` when it can: the
    hold must name an execution the ledger knows failed or crashed (an ``execution_failed``
    hold, or a kept copy whose status says so; ``execution_status`` is that copy's)."""
    if hold.get("execution_id") is None or hold.get("operation_id") is None:
        return f"hold {hold['id']} names no execution to retry"
    if hold["reason"] == Reason.EXECUTION_FAILED.value:
        return None
    if execution_status in RETRYABLE_STATUSES:
        return None
    known = f"its status is {execution_status}" if execution_status else "the ledger has no copy"
    return (
        f"execution {hold['execution_id']} is not known to have failed or crashed ({known}); "
        "n8n retries only those"
    )


def subject(hold: dict[str, Any]) -> tuple[OpenHold, str | None, State | None, bool]:
    state = hold.get("operation_state")
    return (
        OpenHold(hold["id"], Reason(hold["reason"]), bool(hold["blocking"]), hold["cause_key"]),
        hold.get("operation_id"),
        State(state) if state else None,
        bool(hold.get("operation_conflict")),
    )


def offered(hold: dict[str, Any]) -> tuple[str, ...]:
    """What an open hold allows: the decisions the domain lets through, then the updates."""
    return (*domain.allowed(*subject(hold)), *UPDATES)


def why_not(name: str, hold: dict[str, Any]) -> str | None:
    """The domain's reason ``name`` cannot be taken on ``hold``, or ``None`` when it can."""
    if name not in DECISIONS:
        return None
    refused = domain.refusal(name, *subject(hold))
    return str(refused) if refused is not None else None


def refused(name: str, hold: dict[str, Any]) -> str | None:
    """The line that says ``name`` is not possible on ``hold`` (``None`` when it is)."""
    reason = why_not(name, hold)
    if reason is None:
        return None
    return f"{ACTIONS[name].title} is not possible for hold {hold['id']}: {reason}."


def closed(hold: dict[str, Any]) -> IllegalTransition | None:
    """The services' refusal of any action on ``hold`` once it is resolved."""
    if hold["resolved_at"] is None:
        return None
    return already_resolved(
        hold["id"], hold["resolved_by"], hold["resolution"], hold["resolved_at"].astimezone(UTC)
    )


def lost_race(exc: Exception) -> bool:
    """Whether the services refused an action because the hold was resolved first."""
    return isinstance(exc, IllegalTransition) and exc.code == "already_resolved"


def failure(exc: Exception) -> str:
    """What the services' refusal of an action says to a person: nothing changed."""
    if lost_race(exc):
        return f"Someone else got there first: {exc}. Nothing changed."
    return f"Refused, nothing changed: {exc}"


REFUSALS = (IllegalTransition, InvalidInput, NotFound)


def consequence(name: str, hold: dict[str, Any], v: Values) -> str:
    """What will really happen to ``hold`` and its operation: the confirmation's text."""
    op, state = hold.get("operation_id"), hold.get("operation_state") or "-"
    overdue = " Any overdue hold about it closes with it."
    if name == "confirm":
        if hold["reason"] == Reason.RECEIPT_CONFLICT.value:
            becomes = (
                "stays CONFIRMED, with this receipt"
                if hold.get("operation_state") == State.CONFIRMED.value
                else "becomes CONFIRMED with it"
            )
            return (
                f"Receipt {v.receipt!r} stands for operation {op} (now {state}): the "
                f"operation {becomes}, and its receipt_conflict holds close. "
                "Workflows will skip this write from now on." + overdue
            )
        return (
            f"Operation {op} (now {state}) becomes CONFIRMED with receipt "
            f"{v.receipt!r}, and {_outcome_holds(hold)} close. Workflows will skip "
            "this write from now on. Only confirm if you saw the effect in the target system."
            + overdue
        )
    if name == "release":
        again = (
            f" Then n8n is asked to run execution {hold.get('execution_id')} again (a retry): "
            "that new execution will dispatch and WRITE."
            if v.retry
            else ""
        )
        return (
            f"Operation {op} goes back to PREPARED and {_outcome_holds(hold)} close: the "
            "workflow will be allowed to WRITE AGAIN. If your evidence is wrong and the first "
            "write did happen, the write will happen TWICE (a duplicate effect)." + again + overdue
        )
    if name == "cancel":
        return _cancelling(hold, op, state) + overdue
    if name == "dismiss":
        stays = f"operation {op} stays {state}" if op else "nothing else changes"
        return f"Hold {hold['id']} closes as seen; {stays}." + overdue
    if name == "reapprove":
        version = repr(v.version) if v.version else "its processing version"
        until = f"until {for_people(v.expires_at)}" if v.expires_at else "with no expiry"
        return (
            f"Operation {op} (now {state}) is approved again for {version}, {until}: its next "
            "dispatch goes ahead even if the approval it carries expired or names another "
            "version, and its approval holds close. The workflow will be allowed to WRITE."
            + overdue
        )
    if name == "allow-attempt":
        return (
            f"Operation {op} (now {state}) may be dispatched once more, past its max_attempts, "
            "and its max_attempts holds close: the workflow will be allowed to WRITE AGAIN."
            + overdue
        )
    if name == "assign":
        return f"The hold is assigned to {v.owner}."
    if name == "extend":
        return (
            f"The hold's deadline moves later, from {for_people(hold.get('deadline'))} to "
            f"{for_people(v.deadline)}."
        )
    return "The note is added to the hold's record."


def _outcome_holds(hold: dict[str, Any]) -> str:
    """Which holds a confirm or a release closes, named by their reasons: every open hold of
    the operation about the attempt's outcome (``domain.OUTCOME_REASONS``), this one's first;
    a hold of another reason closes alone when the operation has none of those."""
    outcome = sorted(r.value for r in domain.OUTCOME_REASONS)
    reason = hold["reason"]
    if reason in outcome:
        others = " or ".join(r for r in outcome if r != reason)
        return f"this {reason} hold and any open {others} hold of it"
    return f"its open {' or '.join(outcome)} holds (or, without any, this {reason} hold)"


def done(name: str, v: Values, operator: str) -> str:
    """What is said once ``name`` is recorded: what it did (the new owner or deadline, not
    only the act) and who did it."""
    if name == "assign":
        did = f"assigned to {v.owner}"
    elif name == "extend":
        did = f"deadline is now {for_people(v.deadline)}"
    else:
        did = ACTIONS[name].done
    return f"{did} by {operator}"


def _cancelling(hold: dict[str, Any], op: str | None, state: str) -> str:
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


def missing(name: str, v: Values) -> str | None:
    """The first value ``name`` needs that ``v`` lacks, said as the domain says it."""
    if not v.note.strip():
        return "a note is required"
    for field in ACTIONS[name].needs:
        if getattr(v, field) in (None, ""):
            return f"a {field.replace('_', ' ')} is required"
    return None


def call(ledger: Ledger, name: str, hold_id: int, operator: str, v: Values) -> Call[Any]:
    """The service call that records ``name`` on hold ``hold_id`` as ``operator``: the one
    path every way in takes."""
    if name not in ACTIONS:
        raise InvalidInput(f"unknown action {name!r}; one of {', '.join(NAMES)}", "action")
    if name in DECISIONS:
        return ledger.resolve(
            hold_id,
            name,
            note=v.note,
            operator=operator,
            receipt=v.receipt,
            version=v.version,
            expires_at=v.expires_at,
            retry=v.retry and name == "release",
        )
    if name == "assign":
        return ledger.update_hold(hold_id, operator=operator, note=v.note, owner=v.owner)
    if name == "extend":
        until = None if v.extend_by is not None else v.deadline
        return ledger.update_hold(
            hold_id, operator=operator, note=v.note, deadline=until, extend_by=v.extend_by
        )
    return ledger.update_hold(hold_id, operator=operator, note=v.note, next_action=v.next_action)
