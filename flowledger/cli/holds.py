"""Working holds away from the terminal UI: ``holds`` lists the open ones, ``hold ID ACTION``
takes an action on one, with the UI's own rules and words (:mod:`flowledger.services.actions`):
only what the hold allows, the same values required, the same confirmation asked first.

The ledger's modules load inside the commands, so that ``--help`` does not wait for them.
"""

from __future__ import annotations

import dataclasses
import getpass
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowledger.cli.common import (
    BAD_INPUT,
    CONFLICT,
    FAILED,
    NOT_FOUND,
    Command,
    DbOption,
    JsonOption,
    app,
    die,
    echo_json,
    one_line_errors,
    one_of,
    opened,
)
from flowledger.domain.display import visible

if TYPE_CHECKING:
    from flowledger.services.actions import Values
    from flowledger.storage.engine import Store

PAGE = 500  # open holds read at a time
# What the queue's rows say besides the hold's own columns and its operation's state.
_QUEUE_ONLY = ("operation_conflict", "workflow_id", "execution_status")
# Each action's options besides --note, by the name of the value they give.
_OPTIONS = {
    "receipt": "--receipt",
    "owner": "--owner",
    "deadline": "--deadline",
    "next_action": "--next-action",
    "version": "--version",
    "expires_at": "--expires",
}


def _as_listed(row: dict[str, Any]) -> dict[str, Any]:
    """A hold as `holds --json` and `hold --json` give it: as `show --json` lists it, with
    its operation's state (``operation_state``, null for a hold about no operation)."""
    return {k: v for k, v in row.items() if k not in _QUEUE_ONLY}


@app.command("holds")
@one_line_errors
def list_holds(
    db: DbOption = None,
    reason: Annotated[
        str | None, typer.Option("--reason", metavar="REASON", help="Only holds of this reason")
    ] = None,
    owner: Annotated[
        str | None,
        typer.Option("--owner", metavar="NAME", help="Only holds whose owner contains this"),
    ] = None,
    overdue: Annotated[bool, typer.Option("--overdue", help="Only holds past their deadline")] = (
        False
    ),
    as_json: JsonOption = False,
) -> None:
    """The open holds, soonest deadline first: what the terminal UI's queue shows. A terminal
    too narrow for every column leaves out STATE, then OWNER, then DETAIL, rather than break
    a reason, an id or a time; --json and piped output have them all."""
    from flowledger.cli.tables import echo_table, when
    from flowledger.domain import HOLD_REASONS, is_overdue
    from flowledger.plumbing.clock import utcnow
    from flowledger.storage.reads.hold_queue import HoldFilter, hold_queue

    one_of("--reason", reason, {r.value for r in HOLD_REASONS})
    flt = HoldFilter.of(reason=reason, owner=owner, overdue=overdue)
    now = utcnow()
    found: list[dict[str, Any]] = []
    with opened(db) as store:
        while True:
            after = found[-1] if found else None
            page = hold_queue(store, now, flt=flt, limit=PAGE, after=after)
            found += page
            if len(page) < PAGE:
                break
    if as_json:
        echo_json([_as_listed(h) for h in found])
        return
    if not found:
        typer.echo("no open holds: nothing needs you")
        return
    echo_table(
        [
            (
                h["id"],
                h["reason"] + (" (blocking)" if h["blocking"] else ""),
                h["operation_id"] or f"source {h['source'] or '-'}",
                h["operation_state"],
                h["owner"],
                ("OVERDUE " if is_overdue(h["deadline"], now) else "") + when(h["deadline"]),
                h["detail"],
            )
            for h in found
        ],
        header=("ID", "REASON", "OPERATION", "STATE", "OWNER", "DEADLINE", "DETAIL"),
        right={0},
        free={6},  # only the detail may break a word
        drop=(3, 4, 6),  # a narrow terminal does without STATE, then OWNER, then DETAIL
    )


@app.command("hold", cls=Command)
@one_line_errors
def hold_action(
    hold_id: Annotated[
        int, typer.Argument(metavar="ID", help="The hold's id (`holds` lists them)")
    ],
    action: Annotated[
        str,
        typer.Argument(
            metavar="ACTION",
            help="confirm, release, cancel, dismiss, reapprove, allow-attempt, assign, extend "
            "or note",
        ),
    ],
    note: Annotated[
        str | None,
        typer.Option("--note", metavar="TEXT", help="Why; what you saw (every action needs one)"),
    ] = None,
    receipt: Annotated[
        str | None,
        typer.Option("--receipt", metavar="REF", help="confirm: the target's reference"),
    ] = None,
    owner: Annotated[
        str | None, typer.Option("--owner", metavar="NAME", help="assign: who handles it")
    ] = None,
    deadline: Annotated[
        str | None,
        typer.Option(
            "--deadline",
            metavar="WHEN",
            help="extend: +30m, +2h, +1d, 18:00 or 9am (the next one), tomorrow 09:00 or ISO "
            "8601 (UTC unless it says)",
        ),
    ] = None,
    next_action: Annotated[
        str | None, typer.Option("--next-action", metavar="TEXT", help="note: what comes next")
    ] = None,
    version: Annotated[
        str | None,
        typer.Option(
            "--version",
            metavar="VERSION",
            help="reapprove: the version approved [default: the operation's]",
        ),
    ] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires",
            metavar="WHEN",
            help="reapprove: until when, as --deadline [default: never]",
        ),
    ] = None,
    retry: Annotated[
        bool,
        typer.Option(
            "--retry",
            help="release: then ask n8n to run the hold's failed or crashed execution again",
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before acting (as in a script)")
    ] = False,
    operator: Annotated[
        str | None,
        typer.Option(
            "--operator",
            "--actor",
            metavar="NAME",
            help="Name recorded with the action [default: your login name]",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hold afterwards as JSON")] = (
        False
    ),
    db: DbOption = None,
) -> None:
    """Take an action on a hold, as the terminal UI does: each needs a note, asks before it
    acts (unless --yes) and is recorded as an event under your operator name."""
    from flowledger.cli.common import ledger_for
    from flowledger.plumbing.clock import utcnow
    from flowledger.services import actions
    from flowledger.storage.reads.hold_queue import hold as read_hold

    one_of("ACTION", action, actions.NAMES)
    given = {
        "receipt": receipt,
        "owner": owner,
        "deadline": deadline,
        "next_action": next_action,
        "version": version,
        "expires_at": expires,
    }
    spec = actions.ACTIONS[action]
    for name, value in given.items():
        if value is not None and name not in spec.needs + spec.takes:
            die(f"{_OPTIONS[name]} is not an option of {action}")
    if retry and action != "release":
        die(f"--retry is not an option of {action}")
    values = dataclasses.replace(_values(given, note or "", utcnow()), retry=retry)
    lacking = actions.missing(action, values)
    if lacking is not None:
        option = next((o for n, o in _OPTIONS.items() if n.replace("_", " ") in lacking), "--note")
        die(f"{lacking} ({option})")
    who = operator or getpass.getuser()
    with opened(db) as store:
        hold = read_hold(store, hold_id)
        if hold is None:
            die(f"no hold {hold_id}", NOT_FOUND)
        assert hold is not None
        if action == "extend" and deadline is not None:
            values = _extended(values, deadline, hold["deadline"], utcnow())
        refused = actions.closed(hold)
        if refused is not None:
            die(actions.failure(refused), CONFLICT)
        said = actions.refused(action, hold)
        if said is not None:
            die(said)
        if retry:
            _can_retry(store, hold)
        _can_ask(yes)  # a refusal is one line, said before what the action would do
        typer.echo(visible(actions.consequence(action, hold, values)), err=True)
        typer.echo(visible(f"It will be recorded under operator {who}."), err=True)
        _ask(f"{spec.title}?", yes)
        try:
            actions.call(ledger_for(store), action, hold_id, who, values).run()
        except actions.REFUSALS as exc:
            die(actions.failure(exc), _exit_code(exc))
        after = read_hold(store, hold_id)
        if not as_json:
            typer.echo(visible(f"Hold {hold_id} {actions.done(action, values, who)}."))
        if retry:
            _retry_now(store, hold_id, as_json, who)
    if as_json:
        echo_json(_as_listed(after or {}))


def _can_retry(store: Store, hold: dict[str, Any]) -> None:
    """Refuse ``--retry`` before anything changes unless the hold's execution is one n8n
    can retry (:func:`flowledger.services.actions.why_no_retry`)."""
    from flowledger.services.actions import retry_refusal

    why = retry_refusal(store, hold)
    if why is not None:
        die(f"--retry is not possible for hold {hold['id']}: {why}. Nothing changed.")


def _retry_now(store: Store, hold_id: int, quiet: bool, who: str) -> None:
    """Make the retry the release recorded at once and say what n8n did, in one line; the
    release stands whatever n8n answers (a retry it could not make yet, the scheduler makes
    later)."""
    from flowledger.cli.common import file_settings, ledger_for
    from flowledger.scheduled.acting import Acting
    from flowledger.services.values import operator_actor

    cfg = file_settings()
    acting = Acting(ledger_for(store, file=cfg), cfg.sources)
    outcome = acting.retry_hold(hold_id, actor=operator_actor(who))
    if outcome is None or quiet:
        return
    if outcome.outcome == "refused":
        typer.echo(visible(f"The release stands; n8n refused the retry: {outcome.line}"))
    elif outcome.outcome == "waiting":
        typer.echo(visible(f"The release stands; {outcome.line}"))
    else:
        typer.echo(visible(f"Retry asked: {outcome.line}."))


def _exit_code(refusal: Exception) -> int:
    """A refused action's exit code: the hold resolved first, a name not found, or the rest."""
    from flowledger.services.actions import lost_race

    if lost_race(refusal):
        return CONFLICT
    return NOT_FOUND if isinstance(refusal, LookupError) else BAD_INPUT


def _values(given: dict[str, str | None], note: str, now: datetime) -> Values:
    """The options as the action's values, their times read as the UI reads them."""
    from flowledger.services.actions import Values
    from flowledger.tui.format import future_deadline

    def time(name: str) -> datetime | None:
        text = given[name]
        if text is None:
            return None
        try:
            return future_deadline(text, now)
        except ValueError as exc:
            die(f"{_OPTIONS[name]}: {exc}")

    return Values(
        note=note,
        receipt=given["receipt"],
        owner=given["owner"],
        deadline=time("deadline"),
        next_action=given["next_action"],
        version=given["version"],
        expires_at=time("expires_at"),
    )


def _extended(values: Values, typed: str, current: datetime, now: datetime) -> Values:
    """The new deadline as the UI reads it against the hold's: ``+2h`` counted from the
    current deadline (by the services, as they find it), never earlier than it."""
    from flowledger.tui.format import new_deadline

    try:
        deadline, by = new_deadline(typed, current, now)
    except ValueError as exc:
        die(f"--deadline: {exc}")
    counted = by if by is not None and current > now else None
    return dataclasses.replace(values, deadline=deadline, extend_by=counted)


def _can_ask(yes: bool) -> None:
    """Told to go on (``--yes``), or a terminal to ask at; else nothing changes."""
    if not yes and not sys.stdin.isatty():
        die(
            "nothing changed: this action asks before it acts and stdin is not a terminal; "
            "pass --yes to act without asking"
        )


def _ask(question: str, yes: bool) -> None:
    """Go on when told to (``--yes``) or answered yes at the terminal :func:`_can_ask` found;
    else nothing changes."""
    if yes:
        return
    # Asked and read here, not by click's confirm: that writes a space to stdout, and stdout
    # is kept for what the command answers.
    typer.echo(f"{question} [y/N] ", err=True, nl=False)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        typer.echo("Nothing changed.", err=True)
        raise typer.Exit(FAILED)
