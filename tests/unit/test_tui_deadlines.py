"""The deadline a person types in the extend dialog, read against a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowledger.tui.format import future_deadline, parse_deadline

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
        ("tomorrow", "cannot read 'tomorrow' as a deadline: give +30m, +2h, +1d, tomorrow 09:00"),
        ("+3w", "cannot read '+3w' as a deadline"),
        ("tomorrow 25:00", "25:00 is not a time of day"),
    ],
)
def test_an_unreadable_deadline_says_which_forms_are_read(typed: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        parse_deadline(typed, NOW)


@pytest.mark.parametrize("typed", ["today 17:00", "today 09:00", "2026-11-01T12:00"])
def test_a_deadline_not_after_now_is_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="is in the past; the new deadline must be later"):
        future_deadline(typed, NOW)
    assert future_deadline("+1m", NOW) > NOW
