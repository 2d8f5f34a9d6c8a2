"""Twin triggers as the domain decides them: which pairs of dispatches are twins, what the
operation's mark becomes, and how the pair is named, whatever the ids, gaps and clocks."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from flowledger.domain import Reason
from flowledger.domain.limits import MAX_HOLD_DETAIL_LENGTH
from flowledger.domain.twins import Mark, Twin, next_mark, observed, twin_hold, twin_of

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=5)
OP = "invoice:INV-42:send"


def ms(n: float) -> timedelta:
    return timedelta(milliseconds=n)


def mark(execution: str = "311", workflow: str | None = "wf-1", **kw: object) -> Mark:
    return Mark(execution, workflow, T0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("previous", "execution", "workflow", "after", "gap"),
    [
        (mark(), "312", "wf-1", ms(42), 42),
        (mark(), "312", "wf-1", WINDOW, 5000),  # the window's edge counts
        (mark(), "312", "wf-1", ms(-80), 80),  # a receiver whose clock runs behind
        (mark("a"), "b", "wf-1", ms(0.4), 0),  # under a millisecond: 0 ms apart
    ],
)
def test_two_executions_of_one_workflow_within_the_window_are_twins(
    previous: Mark, execution: str, workflow: str, after: timedelta, gap: int
) -> None:
    twin = twin_of(previous, OP, execution, workflow, T0 + after, WINDOW)

    assert twin == Twin(OP, workflow, previous.execution_id, execution, gap)


@pytest.mark.parametrize(
    ("previous", "execution", "workflow", "after", "window"),
    [
        (None, "312", "wf-1", ms(1), WINDOW),  # the first dispatch
        (mark(), "311", "wf-1", ms(1), WINDOW),  # the same execution again (a replay)
        (mark(twin_of="310"), "310", "wf-1", ms(1), WINDOW),  # its twin again
        (mark(), "312", "wf-2", ms(1), WINDOW),  # another workflow
        (mark(), "312", None, ms(1), WINDOW),  # a dispatch that names no workflow
        (mark(), "312", "", ms(1), WINDOW),
        (mark(workflow=None), "312", "wf-1", ms(1), WINDOW),
        (mark(), "312", "wf-1", WINDOW + ms(1), WINDOW),  # just outside
        (mark(), "312", "wf-1", timedelta(days=3650), WINDOW),  # years apart
        (mark(), "312", "wf-1", -timedelta(days=3650), WINDOW),  # a clock years behind
        (mark(), "312", "wf-1", ms(0), timedelta(0)),  # a window of zero: off
    ],
)
def test_other_pairs_are_not_twins(
    previous: Mark | None,
    execution: str,
    workflow: str | None,
    after: timedelta,
    window: timedelta,
) -> None:
    assert twin_of(previous, OP, execution, workflow, T0 + after, window) is None


def test_the_mark_moves_to_each_new_execution_and_remembers_the_twin_it_made() -> None:
    first = next_mark(None, "311", "wf-1", T0, None)
    assert first == Mark("311", "wf-1", T0)

    later = T0 + ms(42)
    twin = twin_of(first, OP, "312", "wf-1", later, WINDOW)
    second = next_mark(first, "312", "wf-1", later, twin)
    assert second == Mark("312", "wf-1", later, twin_of="311")

    # Either of the pair sending its dispatch again changes nothing and is no twin.
    for again in ("311", "312"):
        assert next_mark(second, again, "wf-1", later + ms(5), None) is None
        assert twin_of(second, OP, again, "wf-1", later + ms(5), WINDOW) is None


def test_a_third_execution_is_a_twin_of_the_last_one() -> None:
    pair = Mark("312", "wf-1", T0, twin_of="311")

    twin = twin_of(pair, OP, "313", "wf-1", T0 + ms(30), WINDOW)

    assert twin is not None and (twin.first, twin.second, twin.gap_ms) == ("312", "313", 30)


@pytest.mark.parametrize(
    ("first", "second", "named"),
    [
        ("311", "312", ("311", "312")),
        ("312", "311", ("311", "312")),  # dispatched out of order: named as started
        ("99", "100", ("99", "100")),  # numerically, not as text
        ("b-7", "a-9", ("a-9", "b-7")),
        ("٣", "12", ("12", "٣")),  # a digit outside ASCII is text, not a number
    ],
)
def test_a_twin_names_its_executions_in_the_order_of_their_ids(
    first: str, second: str, named: tuple[str, str]
) -> None:
    assert Twin(OP, "wf-1", first, second, 42).executions() == named


def test_the_hold_is_one_per_source_workflow_and_day_and_says_what_happened() -> None:
    twin = Twin(OP, "wf-1", "312", "311", 42)

    hold = twin_hold(twin, "prod-n8n", date(2026, 12, 6))

    assert hold.reason is Reason.DUPLICATE_TRIGGER and not hold.blocking
    assert hold.cause_key == "duplicate_trigger:prod-n8n:wf-1:2026-12-06"
    assert hold.detail == (
        "the workflow tool started workflow wf-1 twice for one call, 42 ms apart: "
        f"executions 311 and 312 both dispatched {OP}"
    )
    assert twin_hold(twin, None, date(2026, 12, 7)).cause_key == (
        "duplicate_trigger::wf-1:2026-12-07"
    )


def test_the_observation_reads_as_the_hold_does() -> None:
    data = {"workflow_id": "wf-1", "executions": ["311", "312"], "gap_ms": 42}

    assert observed(data) == (
        "the workflow tool started workflow wf-1 twice for one call, 42 ms apart: "
        "executions 311 and 312"
    )
    assert "?" in observed({})  # a damaged event still reads


def test_the_longest_ids_still_make_a_hold_the_ledger_can_store() -> None:
    long = "x" * 200
    twin = Twin("o" * 200, "w" * 200, long, long[:-1] + "y", 5000)

    hold = twin_hold(twin, "s" * 200, date(2026, 12, 6))

    assert len(hold.cause_key) <= 600  # the column's size
    assert len(hold.detail) < MAX_HOLD_DETAIL_LENGTH
