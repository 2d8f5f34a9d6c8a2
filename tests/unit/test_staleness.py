"""The sweep's decisions pinned to whole values: each hold's reason, cause key, detail and
blocking flag, the details of the outcome holds, and when a row is due."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from flowledger.domain import NewHold, Reason
from flowledger.domain.staleness import (
    cutoff,
    execution_failed_detail,
    execution_stuck_hold,
    overdue_hold,
    source_stale_due,
    source_stale_hold,
    stale_prepared_hold,
    unknown_outcome_detail,
)

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
T0_TEXT = "2026-11-02 09:00:00 UTC"  # as people read a time, in a detail
T0_KEY = "2026-11-02T09:00:00+00:00"  # as a cause key holds it
MINUTE = timedelta(minutes=1)
TICK = timedelta(microseconds=1)


def test_the_cutoff_lies_the_waiting_time_before_now() -> None:
    assert cutoff(T0, timedelta(minutes=15)) == datetime(2026, 11, 2, 8, 45, tzinfo=UTC)


@pytest.mark.parametrize(
    ("make", "args", "expected"),
    [
        (
            stale_prepared_hold,
            ("invoice:INV-42:send", 2, T0),
            NewHold(
                Reason.STALE_PREPARED,
                "stale_prepared:invoice:INV-42:send:2",
                f"prepared since {T0_TEXT} and never dispatched",
                False,
            ),
        ),
        (
            execution_stuck_hold,
            ("prod-n8n", "981", T0),
            NewHold(
                Reason.EXECUTION_STUCK,
                "execution_stuck:prod-n8n:981",
                f"execution 981 of prod-n8n running since {T0_TEXT}",
                False,
            ),
        ),
        (
            overdue_hold,
            (7, "unknown_outcome", T0),
            NewHold(
                Reason.OVERDUE,
                f"overdue:7:{T0_KEY}",
                f"hold 7 (unknown_outcome) passed its deadline {T0_TEXT}",
                False,
            ),
        ),
        (
            source_stale_hold,
            ("prod-n8n", T0, timedelta(seconds=90), 5),
            NewHold(
                Reason.SOURCE_STALE,
                f"source_stale:prod-n8n:{T0_KEY}",
                f"source prod-n8n last synced successfully: {T0_TEXT} (5 intervals of 90s passed)",
                False,
            ),
        ),
        (
            source_stale_hold,
            ("prod-n8n", None, timedelta(milliseconds=1500), 3),
            NewHold(
                Reason.SOURCE_STALE,
                "source_stale:prod-n8n:never",
                "source prod-n8n last synced successfully: never (3 intervals of 1.5s passed)",
                False,
            ),
        ),
    ],
    ids=[
        "stale_prepared",
        "execution_stuck",
        "overdue",
        "source_stale",
        "source_never_synced",
    ],
)
def test_each_sweep_hold_is_pinned_whole(
    make: Callable[..., NewHold], args: tuple[object, ...], expected: NewHold
) -> None:
    # Built here, not at collection, so that `make mutate` sees this test call the rule.
    assert make(*args) == expected


@pytest.mark.parametrize(
    ("deadline", "execution_id", "expected"),
    [
        (T0, "exec-1", f"no confirm or failure from execution exec-1 by {T0_TEXT}"),
        (None, None, "no confirm or failure from execution None by its deadline"),
    ],
    ids=["with-deadline", "without-deadline"],
)
def test_the_unknown_outcome_detail_names_the_execution_and_deadline(
    deadline: datetime | None, execution_id: str | None, expected: str
) -> None:
    assert unknown_outcome_detail(deadline, execution_id) == expected


def test_the_execution_failed_detail_names_the_execution_and_its_status() -> None:
    assert execution_failed_detail("crashed", "exec-1") == (
        "execution exec-1 ended crashed while the operation was dispatching"
    )


@pytest.mark.parametrize(
    ("elapsed", "due"),
    [
        (5 * MINUTE - TICK, False),
        (5 * MINUTE, True),
        (5 * MINUTE + TICK, True),
        (timedelta(0), False),
        (-MINUTE, False),
    ],
    ids=["just-before", "exactly", "just-after", "at-once", "clock-behind"],
)
def test_a_source_is_stale_from_exactly_n_intervals_on(elapsed: timedelta, due: bool) -> None:
    assert source_stale_due(T0, MINUTE, 5, T0 + elapsed) is due
