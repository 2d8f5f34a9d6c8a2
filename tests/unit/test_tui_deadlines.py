"""The deadline a person types in the extend dialog, read against a fixed clock and the hold's
current deadline: relative forms count from that deadline, and nothing moves it earlier."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from flowledger.domain import IllegalTransition
from flowledger.domain.extension import extended_deadline
from flowledger.tui.format import new_deadline, parse_deadline

NOW = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("+30m", datetime(2026, 11, 2, 17, 30, tzinfo=UTC)),
        ("+ 2h", datetime(2026, 11, 2, 19, 0, tzinfo=UTC)),
        ("+1d", datetime(2026, 11, 3, 17, 0, tzinfo=UTC)),
        ("tomorrow 09:00", datetime(2026, 11, 3, 9, 0, tzinfo=UTC)),
        ("Today 18:45", datetime(2026, 11, 2, 18, 45, tzinfo=UTC)),
        ("2026-11-04 06:15", datetime(2026, 11, 4, 6, 15, tzinfo=UTC)),
        ("2026-11-04T08:15+02:00", datetime(2026, 11, 4, 6, 15, tzinfo=UTC)),
    ],
)
def test_every_documented_form_reads_as_a_utc_time(typed: str, meant: datetime) -> None:
    assert parse_deadline(typed, NOW) == meant


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("tomorrow", "cannot read 'tomorrow' as a deadline: give +30m, +2h, +1d"),
        ("+3w", "cannot read '+3w' as a deadline"),
        ("tomorrow 25:00", "25:00 is not a time of day"),
    ],
)
def test_an_unreadable_deadline_says_which_forms_are_read(typed: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        parse_deadline(typed, NOW)


DUE = NOW + timedelta(hours=1)  # the hold's current deadline


@pytest.mark.parametrize("typed", ["today 17:00", "today 09:00", "2026-11-01T12:00"])
def test_a_deadline_not_after_now_is_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="is in the past; the new deadline must be later"):
        new_deadline(typed, DUE, NOW)


@pytest.mark.parametrize("typed", ["today 17:30", "2026-11-02T18:00"])
def test_a_deadline_before_the_current_one_is_refused_not_shortened(typed: str) -> None:
    with pytest.raises(ValueError, match=r"not later than the current deadline .* never moves"):
        new_deadline(typed, DUE, NOW)


def test_a_relative_extension_counts_from_the_current_deadline() -> None:
    assert new_deadline("+2h", DUE, NOW) == (DUE + timedelta(hours=2), timedelta(hours=2))
    assert new_deadline("today 19:00", DUE, NOW) == (datetime(2026, 11, 2, 19, tzinfo=UTC), None)


def test_a_relative_extension_of_a_passed_deadline_counts_from_now() -> None:
    passed = NOW - timedelta(hours=3)
    assert new_deadline("+2h", passed, NOW)[0] == NOW + timedelta(hours=2)


@pytest.mark.parametrize(
    ("current", "until", "by"),
    [
        (DUE, DUE, None),
        (DUE, DUE - timedelta(seconds=1), None),
        (DUE, NOW - timedelta(minutes=5), None),
        (DUE, None, timedelta(0)),
        (DUE, None, -timedelta(hours=1)),
    ],
)
def test_the_rule_never_shortens_a_deadline(
    current: datetime, until: datetime | None, by: timedelta | None
) -> None:
    with pytest.raises(IllegalTransition):
        extended_deadline(current, NOW, until=until, by=by)
