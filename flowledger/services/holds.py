"""Holds in the writer's transaction: the one place they are opened, their closing when a rule
resolves them, and a person's decisions on them (resolve, assign, extend, note).

Each function takes the caller's transaction as the port sees it
(:class:`flowledger.services.port.Tx`), whose methods are the repositories' statements
(:mod:`flowledger.storage.holds`, :mod:`flowledger.storage.operations`);
:class:`flowledger.services.ledger.Ledger` runs them and is still the only way in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from flowledger import domain
from flowledger.domain import Change, IllegalTransition, OpenHold, Reason, Resolution, State, limits
from flowledger.domain.chain import data_time
from flowledger.domain.extension import extended_deadline
from flowledger.domain.redact import Secrets, redact
from flowledger.domain.times import for_people
from flowledger.services import outbox
from flowledger.services.port import Tx
from flowledger.services.values import Answer, HoldTarget, InvalidInput, NotFound
from flowledger.storage import operations
from flowledger.storage.models import from_db_time
from flowledger.storage.sql import Row

ACTIONS = domain.DECISIONS


def open_holds(
    tx: Tx,
    targets: Sequence[HoldTarget],
    deadlines: domain.HoldDeadlines,
    alert_targets: Sequence[str],
    secrets: Secrets,
    *,
    locked: bool = False,
    pin_sources: Sequence[str] = (),
) -> list[int | None]:
    """Open each hold whose cause key has none yet: the one place holds are opened. A
    hold's detail (a tool's or a target's words) is stored redacted of ``secrets``. Each
    opening is an event and, when alert URLs are configured, one outbox row per URL in the
    same transaction; a hold about an execution of one of ``pin_sources`` queues that
    execution's pin (:func:`pin_row`) there too. The operations the holds concern are locked
    until the commit first, unless the caller says it holds them already (``locked``), so
    that a writer reading one meanwhile waits and then sees the hold
    (:func:`operations.lock_operations`). Returns the
    new ids (``None`` where the cause already had a hold). Works a batch at a time so the
    sweep stays cheap."""
    if not targets:
        return []
    concerned = [t.operation_id for t in targets if t.operation_id]
    if not locked:
        tx.lock_operations(concerned)
    tx.read_again(concerned)
    unique: dict[str, HoldTarget] = {}
    for t in targets:
        unique.setdefault(t.hold.cause_key, t)
    # The holds share their opening time: a reason's deadline, and that deadline as the
    # event writes it, are worked out once per reason rather than once per hold.
    due: dict[Reason, tuple[datetime, str | None]] = {}
    for t in unique.values():
        if t.hold.reason not in due:
            deadline = deadlines.of(tx.now, t.hold.reason)
            due[t.hold.reason] = (deadline, data_time(deadline))
    rows: list[dict[str, Any]] = [
        {
            "cause_key": key,
            "reason": t.hold.reason.value,
            "blocking": t.hold.blocking,
            "operation_id": t.operation_id,
            "execution_id": t.execution_id,
            "source": t.source,
            "detail": redact(t.hold.detail, secrets)[: limits.MAX_HOLD_DETAIL_LENGTH],
            "opened_at": tx.now,
            "deadline": due[t.hold.reason][0],
        }
        for key, t in unique.items()
    ]
    ids = tx.insert_new_holds(rows)
    if not ids:
        return [None] * len(targets)
    fresh = unique
    if len(ids) < len(unique):  # some causes had their hold already
        fresh = {k: t for k, t in unique.items() if k in ids}
        rows = [r for r in rows if r["cause_key"] in ids]
    alerts: list[dict[str, Any]] = []
    pins: list[dict[str, Any]] = []
    for t, row in zip(fresh.values(), rows, strict=True):
        hold_id = ids[t.hold.cause_key]
        data = {
            "reason": row["reason"],
            "blocking": t.hold.blocking,
            "detail": row["detail"],
            "execution_id": t.execution_id,
            "source": t.source,
            "cause_key": t.hold.cause_key,
            "deadline": due[t.hold.reason][1],
        }
        if t.refers_to is not None:
            data["refers_to"] = t.refers_to
        tx.event("hold_opened", t.operation_id, data, hold_id=hold_id)
        if alert_targets:
            alert = outbox.HoldAlert(
                hold_id, row["reason"], t.hold.blocking, t.operation_id, t.execution_id,
                t.source, row["detail"], tx.now, row["deadline"], t.refers_to,
            )  # fmt: skip
            alerts.extend(outbox.rows_for(alert, alert_targets, tx.now))
        pin = pin_row(hold_id, t, pin_sources, tx.now)
        if pin is not None:
            pins.append(pin)
    if alerts:
        tx.insert_alerts(alerts)
    if pins:
        tx.insert_pins(pins)
    first: dict[str, int | None] = {k: ids[k] for k in fresh}
    return [first.pop(t.hold.cause_key, None) for t in targets]


def pin_row(
    hold_id: int, t: HoldTarget, pin_sources: Sequence[str], now: datetime
) -> dict[str, Any] | None:
    """The pin a new hold queues, or ``None``: only a hold of a reason that is about an
    execution (:data:`flowledger.domain.PINNED_REASONS`), naming one, of a source that pins
    (``pin_sources``). A hold that names no source is queued when some source pins; the
    scheduler finds which one has the execution."""
    if t.execution_id is None or t.hold.reason not in domain.PINNED_REASONS or not pin_sources:
        return None
    if t.source is not None and t.source not in pin_sources:
        return None
    return {
        "hold_id": hold_id,
        "source": t.source,
        "execution_id": t.execution_id,
        "created_at": now,
        "attempts": 0,
        "next_attempt_at": now,
    }


def add_evidence(
    tx: Tx,
    operation_id: str,
    evidence: Sequence[tuple[int, domain.NewHold]],
    execution_id: str | None,
    secrets: Secrets,
) -> None:
    """Add each further cause's detail to the open hold of its reason (the hold it would
    have opened: :func:`flowledger.domain.causes.one_per_reason`), with a ``hold_evidence``
    event naming that hold; no hold and no alert of its own. Redacted as a hold's detail is."""
    for hold_id, hold in evidence:
        detail = redact(hold.detail, secrets)[: limits.MAX_HOLD_DETAIL_LENGTH]
        if tx.add_hold_evidence(hold_id, detail) is None:
            continue  # decided since it was read; the call's own event still records it
        evidence_event(tx, operation_id, hold_id, hold, detail, execution_id)


def evidence_event(
    tx: Tx,
    operation_id: str | None,
    hold_id: int,
    hold: domain.NewHold,
    evidence: str,
    execution_id: str | None,
) -> None:
    """The ``hold_evidence`` event of a further cause added to open hold ``hold_id``."""
    data = {
        "reason": hold.reason.value,
        "evidence": evidence,
        "cause_key": hold.cause_key,
        "execution_id": execution_id,
    }
    tx.event("hold_evidence", operation_id, data, hold_id=hold_id)


def close_holds(tx: Tx, change: Change, operation_id: str | None, note: str) -> None:
    """Close the holds a rule resolved, each with a ``hold_resolved`` event that carries the
    rule's data, and with each the ``overdue`` holds about it (resolution ``cause_resolved``,
    the event naming the hold and how it was resolved): nothing is left to dismiss about a
    hold that no longer exists."""
    resolution = change.resolution.value if change.resolution else None
    if change.resolve_holds and operation_id is not None:
        tx.read_again([operation_id])
    for hold_id in change.resolve_holds:
        if tx.close_hold(hold_id, resolution, note):
            data: dict[str, Any] = {"resolution": resolution, "note": note, **change.data}
            if change.receipt:
                data["receipt"] = change.receipt
            tx.event("hold_resolved", operation_id, data, hold_id=hold_id)
            _close_overdue_about(tx, hold_id, resolution, operation_id)


def _close_overdue_about(
    tx: Tx, hold_id: int, resolution: str | None, operation_id: str | None
) -> None:
    settled = Resolution.CAUSE_RESOLVED.value
    for overdue_id in tx.open_overdue_about(hold_id):
        note = f"hold {hold_id} was resolved ({resolution or 'closed'})"
        if tx.close_hold(overdue_id, settled, note):
            data = {
                "resolution": settled,
                "note": note,
                "cause_hold_id": hold_id,
                "cause_resolution": resolution,
            }
            tx.event("hold_resolved", operation_id, data, hold_id=overdue_id)


def require_operation(tx: Tx, operation_id: str) -> tuple[domain.Operation, Row]:
    row = tx.load_operation(operation_id)
    if row is None:
        raise NotFound(f"no operation {operation_id!r}")
    return operations.to_domain(row), row


def _open_hold_row(tx: Tx, hold_id: int) -> Row:
    row = tx.load_hold(hold_id)
    if row is None:
        raise NotFound(f"no hold {hold_id}")
    if row.resolved_at is not None:
        when = from_db_time(row.resolved_at)
        assert when is not None
        raise already_resolved(hold_id, row.resolved_by, row.resolution, when)
    return row


def already_resolved(
    hold_id: int, by: str | None, resolution: str | None, when: datetime
) -> IllegalTransition:
    """The refusal of any action on a hold that is closed already."""
    return IllegalTransition(
        f"hold {hold_id} was already resolved by {by} ({resolution}) at {for_people(when)}",
        code="already_resolved",
    )


def resolution_work(
    hold_id: int,
    action: str,
    note: str,
    receipt: str | None,
    approval: tuple[str | None, datetime | None] = (None, None),
    retry_by: str | None = None,
) -> Callable[[Tx], Answer | None]:
    """A person's decision on a hold (one of :data:`ACTIONS`) as a unit of work; ``approval``
    is the version and expiry ``reapprove`` records (the operation's version by default).
    ``retry_by``: a release that also asks the workflow tool to run the hold's execution
    again, asked by that actor: recorded once a hold (:func:`ask_retry`), in the release's
    transaction; the scheduler makes the call."""
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}", "action")
    if retry_by is not None and action != "release":
        raise InvalidInput("only a release can ask for a retry", "retry")

    def work(tx: Tx) -> Answer | None:
        row = _open_hold_row(tx, hold_id)
        hold = OpenHold(row.id, Reason(row.reason), bool(row.blocking), row.cause_key)
        if action == "dismiss":
            close_holds(tx, domain.dismiss(hold, note), row.operation_id, note.strip())
            return None
        if row.operation_id is None:
            refused = domain.refusal(action, hold, None, None, False)
            assert refused is not None
            raise refused
        op, op_row = require_operation(tx, row.operation_id)
        holds = tx.holds_of(op.operation_id)
        if action == "confirm":
            change = domain.confirm_with_evidence(op, hold, holds, receipt or "", note)
        elif action == "release":
            change = domain.release_for_retry(op, hold, holds, note)
        elif action == "reapprove":
            given = domain.Approval(approval[0] or op.processing_version, approval[1])
            change = domain.reapprove(op, hold, holds, given, note, tx.now)
        elif action == "allow-attempt":
            change = domain.allow_attempt(op, hold, holds, note)
        else:
            change = domain.cancel(op, holds, note)
        if change.operation is not None:
            tx.save_operation(op_row, change.operation)
        if action == "release":
            # A person let the operation go again: the next execution to dispatch it (the
            # retry asked here, or one started in the tool) is a new round, not a twin trigger.
            tx.mark_dispatch(op.operation_id, None)
        if action in ("confirm", "release") and op.state is State.DISPATCHING:
            outcome = "confirmed" if action == "confirm" else "released"
            tx.end_attempt(op.operation_id, op.attempt, outcome)
        if action == "confirm":
            tx.insert_receipt(
                op.operation_id, op.attempt, receipt or "", kind="evidence", detail=note.strip()
            )
        close_holds(tx, change, op.operation_id, note.strip())
        if retry_by is not None:
            ask_retry(tx, row, retry_by)
        final = change.operation or op
        return Answer(
            op.operation_id, final.state.value, attempt=final.attempt, receipt=final.receipt
        )

    return work


def ask_retry(tx: Tx, hold: Row, asked_by: str) -> None:
    """Record, once a hold, that its execution is to be run again in its tool, with a
    ``retry_asked`` event; a hold that names no execution cannot ask."""
    if hold.execution_id is None or hold.operation_id is None:
        raise IllegalTransition(
            f"hold {hold.id} names no execution to retry", code="nothing_to_retry"
        )
    row = {
        "hold_id": hold.id,
        "operation_id": hold.operation_id,
        "source": hold.source,
        "execution_id": hold.execution_id,
        "asked_at": tx.now,
        "asked_by": asked_by,
        "attempts": 0,
        "next_attempt_at": tx.now,
    }
    if tx.ask_retry(row):
        data = {"execution_id": hold.execution_id, "source": hold.source}
        tx.event("retry_asked", hold.operation_id, data, hold_id=hold.id)


def update_work(
    hold_id: int,
    note: str,
    *,
    owner: str | None,
    deadline: datetime | None,
    next_action: str | None,
    extend_by: timedelta | None = None,
) -> Callable[[Tx], None]:
    """Assign, extend the deadline (to ``deadline``, or ``extend_by`` later than it is:
    :func:`~flowledger.domain.extension.extended_deadline`, never earlier), set the next
    action, or just add a note."""

    def work(tx: Tx) -> None:
        row = _open_hold_row(tx, hold_id)
        values: dict[str, Any] = {}
        data: dict[str, Any] = {"note": note}
        if owner is not None:
            values["owner"] = data["owner"] = owner
        if deadline is not None or extend_by is not None:
            current = from_db_time(row.deadline)
            assert current is not None
            new = extended_deadline(current, tx.now, until=deadline, by=extend_by)
            values["deadline"] = tx.time(new)
            data["deadline"] = data_time(new)
        if next_action is not None:
            values["next_action"] = data["next_action"] = next_action[
                : limits.MAX_NEXT_ACTION_LENGTH
            ]
        tx.change_hold(hold_id, row.version, values)
        kind = (
            "hold_assigned"
            if owner is not None
            else "hold_extended"
            if "deadline" in values
            else "hold_noted"
        )
        tx.event(kind, row.operation_id, data, hold_id=hold_id)

    return work
