"""The queues of what the ledger does in the workflow tool: executions to pin while a hold is
about them (``evidence_pins``) and retries a person asked for (``retry_requests``).

The rows are written with the hold that needs them (:func:`insert_pins`) or with the release
that asked (:func:`ask_retry`); the scheduler drains them (:mod:`flowledger.scheduled.acting`).
Every update names a row not yet done, so a row another drainer finished meanwhile is left as
it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.acting_models import EvidencePin, RetryRequest
from flowledger.storage.models import Execution, Hold, table
from flowledger.storage.tx import Tx

PINS = table(EvidencePin)
RETRIES = table(RetryRequest)
HOLDS = table(Hold)
EXECUTIONS = table(Execution)
MAX_ERROR = 2000


# ---------------------------------------------------------------------- written with a hold


def insert_pins(tx: Tx, rows: list[dict[str, Any]]) -> None:
    """Queue the executions the holds just opened are about, in the holds' transaction."""
    tx.conn.execute(PINS.insert(), rows)


def ask_retry(tx: Tx, row: dict[str, Any]) -> bool:
    """Record that a retry was asked for the hold ``row`` names, once: ``False`` when it was
    asked before (the hold's row exists)."""
    found = tx.conn.execute(
        sa.select(RETRIES.c.id).where(RETRIES.c.hold_id == row["hold_id"])
    ).first()
    if found is not None:
        return False
    tx.conn.execute(RETRIES.insert(), [row])
    return True


# ---------------------------------------------------------------------- pins


def due_pins(conn: sa.Connection, now: datetime, limit: int) -> Sequence[Any]:
    """Up to ``limit`` pins not yet made and due at ``now`` whose hold is still open (the
    evidence of a resolved hold need not be kept), oldest first, with the hold's operation."""
    return conn.execute(
        sa.select(PINS, HOLDS.c.operation_id)
        .select_from(PINS.join(HOLDS, HOLDS.c.id == PINS.c.hold_id))
        .where(
            PINS.c.pinned_at.is_(None),
            PINS.c.next_attempt_at <= now,
            HOLDS.c.resolved_at.is_(None),
        )
        .order_by(PINS.c.next_attempt_at, PINS.c.id)
        .limit(limit)
    ).all()


def mark_pinned(conn: sa.Connection, pin_id: int, source: str, at: datetime) -> bool:
    done = conn.execute(
        PINS.update()
        .where(PINS.c.id == pin_id, PINS.c.pinned_at.is_(None))
        .values(pinned_at=at, source=source, attempts=PINS.c.attempts + 1, last_error=None)
    )
    return done.rowcount == 1


def pin_later(
    conn: sa.Connection, pin_id: int, *, attempts: int, at: datetime, error: str,
    source: str | None = None,
) -> None:  # fmt: skip
    """Try again at ``at``; ``source``: the one found for it, so that what waits is shown
    with its source (a hold may name none)."""
    values: dict[str, Any] = {"attempts": attempts, "next_attempt_at": at,
                              "last_error": error[:MAX_ERROR]}  # fmt: skip
    if source is not None:
        values["source"] = source
    conn.execute(
        PINS.update().where(PINS.c.id == pin_id, PINS.c.pinned_at.is_(None)).values(values)
    )


def pinned_after_holds(conn: sa.Connection, source: str | None = None) -> list[dict[str, Any]]:
    """The executions pinned for holds that are all resolved now, not yet deleted: what a
    person may delete in the tool. One row an execution, with its holds and when the last was
    resolved."""
    p2, h2 = PINS.alias("p2"), HOLDS.alias("h2")
    open_about = (
        sa.select(sa.literal(1))
        .select_from(p2.join(h2, h2.c.id == p2.c.hold_id))
        .where(
            p2.c.execution_id == PINS.c.execution_id,
            p2.c.source.is_not_distinct_from(PINS.c.source),
            h2.c.resolved_at.is_(None),
        )
        .correlate(PINS)
    )
    # The kept copy says whether the ledger has the execution, and its status.
    copy_status = (
        sa.select(EXECUTIONS.c.status)
        .where(
            EXECUTIONS.c.source == PINS.c.source,
            EXECUTIONS.c.external_id == PINS.c.execution_id,
        )
        .correlate(PINS)
        .scalar_subquery()
    )
    stmt = (
        sa.select(
            PINS.c.source,
            PINS.c.execution_id,
            sa.func.min(PINS.c.pinned_at).label("pinned_at"),
            sa.func.max(HOLDS.c.resolved_at).label("resolved_at"),
            sa.func.count(PINS.c.hold_id).label("holds"),
            sa.func.min(PINS.c.hold_id).label("first_hold_id"),
            copy_status.label("copy_status"),
        )
        .select_from(PINS.join(HOLDS, HOLDS.c.id == PINS.c.hold_id))
        .where(
            PINS.c.pinned_at.is_not(None),
            PINS.c.deleted_at.is_(None),
            ~sa.exists(open_about),
        )
        .group_by(PINS.c.source, PINS.c.execution_id)
        .order_by(PINS.c.source, sa.func.min(PINS.c.pinned_at), PINS.c.execution_id)
    )
    if source is not None:
        stmt = stmt.where(PINS.c.source == source)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def waiting(conn: sa.Connection) -> list[dict[str, Any]]:
    """What waits to be done in the tool, one row a kind (``pin``, ``retry``) and source: how
    many, since when (the oldest asked), the newest error and whether it was a refused scope
    (403). Pins of resolved holds are never tried again, so they do not wait."""
    found: list[dict[str, Any]] = []
    pin_open = sa.and_(PINS.c.pinned_at.is_(None), HOLDS.c.resolved_at.is_(None))
    pins_from = PINS.join(HOLDS, HOLDS.c.id == PINS.c.hold_id)
    for what, tbl, since, where, joined in (
        ("pin", PINS, PINS.c.created_at, pin_open, pins_from),
        ("retry", RETRIES, RETRIES.c.asked_at, RETRIES.c.done_at.is_(None), RETRIES),
    ):
        groups = conn.execute(
            sa.select(tbl.c.source, sa.func.count().label("count"), sa.func.min(since))
            .select_from(joined)
            .where(where)
            .group_by(tbl.c.source)
            .order_by(tbl.c.source)
        ).all()
        for source, count, oldest in groups:
            # The error of the row tried last: the one the tool answered most recently.
            error = conn.execute(
                sa.select(tbl.c.last_error)
                .select_from(joined)
                .where(where, tbl.c.source.is_not_distinct_from(source),
                       tbl.c.last_error.is_not(None))
                .order_by(tbl.c.next_attempt_at.desc(), tbl.c.id.desc())
                .limit(1)
            ).scalar()  # fmt: skip
            scope = error is not None and "scope (403)" in error
            found.append({"what": what, "source": source, "count": int(count), "since": oldest,
                          "last_error": error, "scope": scope})  # fmt: skip
    return found


def mark_deleted(
    conn: sa.Connection, source: str, execution_id: str, at: datetime
) -> list[tuple[str | None, list[int]]]:
    """Every pin of that execution is done with: it was deleted in the tool. The operations
    those pins were for, each with its holds (oldest first), for the events that say so."""
    mine = sa.and_(
        PINS.c.source == source,
        PINS.c.execution_id == execution_id,
        PINS.c.pinned_at.is_not(None),
        PINS.c.deleted_at.is_(None),
    )
    found = conn.execute(
        sa.select(PINS.c.id, PINS.c.hold_id, HOLDS.c.operation_id)
        .select_from(PINS.join(HOLDS, HOLDS.c.id == PINS.c.hold_id))
        .where(mine)
        .order_by(PINS.c.hold_id)
    ).all()
    if not found:
        return []
    conn.execute(
        PINS.update().where(mine, PINS.c.id.in_([r.id for r in found])).values(deleted_at=at)
    )
    by_operation: dict[str | None, list[int]] = {}
    for r in found:
        by_operation.setdefault(r.operation_id, []).append(r.hold_id)
    return list(by_operation.items())


# ---------------------------------------------------------------------- retries


def due_retries(conn: sa.Connection, now: datetime, limit: int) -> Sequence[Any]:
    """Up to ``limit`` retries not done and due at ``now``, oldest first."""
    return conn.execute(
        sa.select(RETRIES)
        .where(RETRIES.c.done_at.is_(None), RETRIES.c.next_attempt_at <= now)
        .order_by(RETRIES.c.next_attempt_at, RETRIES.c.id)
        .limit(limit)
    ).all()


def retry_row(conn: sa.Connection, hold_id: int) -> Any:
    return conn.execute(sa.select(RETRIES).where(RETRIES.c.hold_id == hold_id)).first()


def claim_retry(
    conn: sa.Connection, retry_id: int, at: datetime, read: datetime | None, busy_until: datetime
) -> bool:
    """Mark the retry as being called now (committed before the call), if it is still as it
    was read (``read``: its ``called_at`` then): ``False`` when it is done, or another process
    claimed it meanwhile, which then makes the call. No drainer takes it again before
    ``busy_until`` (when the call has surely ended)."""
    same = RETRIES.c.called_at.is_(None) if read is None else RETRIES.c.called_at == read
    done = conn.execute(
        RETRIES.update()
        .where(RETRIES.c.id == retry_id, RETRIES.c.done_at.is_(None), same)
        .values(called_at=at, attempts=RETRIES.c.attempts + 1, next_attempt_at=busy_until)
    )
    return done.rowcount == 1


def finish_retry(
    conn: sa.Connection,
    retry_id: int,
    *,
    at: datetime,
    outcome: str,
    new_execution_id: str | None,
    error: str | None,
) -> bool:
    done = conn.execute(
        RETRIES.update()
        .where(RETRIES.c.id == retry_id, RETRIES.c.done_at.is_(None))
        .values(
            done_at=at,
            outcome=outcome,
            new_execution_id=new_execution_id,
            last_error=None if error is None else error[:MAX_ERROR],
        )
    )
    return done.rowcount == 1


def retry_later(
    conn: sa.Connection, retry_id: int, *, at: datetime, error: str, called: bool,
    source: str | None = None,
) -> None:  # fmt: skip
    """Try again at ``at``; ``called=False`` when the call certainly never reached the tool
    (so the next try need not look for its result there first); ``source``: the one found
    for it, as :func:`pin_later`."""
    values: dict[str, Any] = {"next_attempt_at": at, "last_error": error[:MAX_ERROR]}
    if not called:
        values["called_at"] = None
    if source is not None:
        values["source"] = source
    conn.execute(
        RETRIES.update().where(RETRIES.c.id == retry_id, RETRIES.c.done_at.is_(None)).values(values)
    )


def retries_of(conn: sa.Connection, operation_id: str) -> list[dict[str, Any]]:
    """The retries asked for an operation's holds, oldest first."""
    stmt = sa.select(RETRIES).where(RETRIES.c.operation_id == operation_id).order_by(RETRIES.c.id)
    return [dict(r._mapping) for r in conn.execute(stmt)]


def retries_since(conn: sa.Connection, since: datetime) -> list[dict[str, Any]]:
    """The retries asked since ``since``, or not done yet: for the handover."""
    stmt = (
        sa.select(RETRIES)
        .where(sa.or_(RETRIES.c.asked_at >= since, RETRIES.c.done_at.is_(None)))
        .order_by(RETRIES.c.id)
    )
    return [dict(r._mapping) for r in conn.execute(stmt)]


def execution_status(conn: sa.Connection, source: str | None, execution_id: str) -> str | None:
    """The kept copy's status of an execution (of ``source``, or of any source)."""
    stmt = sa.select(EXECUTIONS.c.status).where(EXECUTIONS.c.external_id == execution_id)
    if source is not None:
        stmt = stmt.where(EXECUTIONS.c.source == source)
    found = conn.execute(stmt.limit(1)).first()
    return found.status if found is not None else None


def source_of_copy(conn: sa.Connection, sources: Sequence[str], execution_id: str) -> str | None:
    """Which of ``sources`` has a kept copy of the execution (the first, by name)."""
    if not sources:
        return None
    found = conn.execute(
        sa.select(EXECUTIONS.c.source)
        .where(EXECUTIONS.c.external_id == execution_id, EXECUTIONS.c.source.in_(list(sources)))
        .order_by(EXECUTIONS.c.source)
        .limit(1)
    ).first()
    return found.source if found is not None else None
