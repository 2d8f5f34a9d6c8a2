"""The sweep's decisions as plain functions: when a row is due, and which hold it gets.

No clock and no database here: the sweep passes ``now`` and the rows it read. Each hold's cause
key comes from :func:`flowledger.domain.causes.cause_key`, so a repeated sweep opens nothing twice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from flowledger.domain.causes import new_hold
from flowledger.domain.display import counted
from flowledger.domain.model import NewHold, Reason
from flowledger.domain.times import for_people

# Execution statuses that mean "the run ended badly": the write may or may not have happened.
FAILED_EXECUTION_STATUSES = ("error", "crashed")
RUNNING_EXECUTION_STATUS = "running"


def cutoff(now: datetime, after: timedelta) -> datetime:
    """Rows last touched at or before this time have waited ``after``: they are due."""
    return now - after


def stale_prepared_hold(operation_id: str, attempt: int, since: datetime) -> NewHold:
    return new_hold(
        Reason.STALE_PREPARED,
        stale_prepared_detail(since),
        operation_id=operation_id,
        attempt=attempt,
    )


def stale_prepared_detail(since: datetime) -> str:
    return f"prepared since {for_people(since)} and never dispatched"


def unknown_outcome_detail(deadline: datetime | None, execution_id: str | None) -> str:
    when = for_people(deadline) if deadline is not None else "its deadline"
    return f"no confirm or failure from execution {execution_id} by {when}"


def execution_failed_detail(status: str, execution_id: str) -> str:
    return f"execution {execution_id} ended {status} while the operation was dispatching"


def execution_stuck_hold(source: str, external_id: str, started_at: datetime) -> NewHold:
    return new_hold(
        Reason.EXECUTION_STUCK,
        f"execution {external_id} of {source} running since {for_people(started_at)}",
        source=source,
        execution_id=external_id,
    )


def overdue_hold(hold_id: int, reason: str, deadline: datetime) -> NewHold:
    return new_hold(
        Reason.OVERDUE,
        f"hold {hold_id} ({reason}) passed its deadline {for_people(deadline)}",
        hold_id=hold_id,
        deadline=deadline,
    )


def source_stale_due(
    reference: datetime, interval: timedelta, intervals: int, now: datetime
) -> bool:
    """A source is stale once ``intervals`` sync intervals passed since ``reference`` (its last
    successful sync, or when this sweep first saw it without one)."""
    return now - reference >= interval * intervals


def source_stale_hold(
    name: str, last_success_at: datetime | None, interval: timedelta, intervals: int
) -> NewHold:
    # The cause key keeps the time's ISO form (the keys stored before say it so); the detail
    # is for people.
    since = last_success_at.isoformat() if last_success_at is not None else "never"
    shown = for_people(last_success_at) if last_success_at is not None else "never"
    return new_hold(
        Reason.SOURCE_STALE,
        f"source {name} last synced successfully: {shown} "
        f"({counted(intervals, 'interval')} of {interval.total_seconds():g}s passed)",
        source=name,
        since=since,
    )
