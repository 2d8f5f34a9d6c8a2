"""A typed time, read one way for the terminal UI's deadlines (a future time meant) and the
CLI's ``--since`` (a past one), against a clock and a time zone passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowledger.domain import times

NOW = datetime(2026, 11, 2, 17, 0, tzinfo=UTC)  # a Monday, 17:00 UTC
BERLIN_WINTER = timezone(timedelta(hours=1))


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("typed", "since", "deadline"),
    [
        ("-2h", at(2, 15), at(2, 15)),
        ("2h", at(2, 15), at(2, 19)),
        ("+2h", at(2, 19), at(2, 19)),
        ("- 30m", at(2, 16, 30), at(2, 16, 30)),
        ("1d", at(1, 17), at(3, 17)),
        ("8am", at(2, 8), at(3, 8)),
        ("8pm", at(1, 20), at(2, 20)),
        ("8:30PM", at(1, 20, 30), at(2, 20, 30)),
        ("12am", at(2, 0), at(3, 0)),
        ("12pm", at(2, 12), at(3, 12)),
        ("17:00", at(2, 17), at(3, 17)),
        ("yesterday 18:00", at(1, 18), at(1, 18)),
        ("Today 9am", at(2, 9), at(2, 9)),
        ("tomorrow 09:00", at(3, 9), at(3, 9)),
        ("2026-11-02", at(2, 0), at(2, 0)),
        ("2026-11-02 08:15", at(2, 8, 15), at(2, 8, 15)),
        ("2026-11-02T08:15+02:00", at(2, 6, 15), at(2, 6, 15)),
        ("2026-11-02T08:15Z", at(2, 8, 15), at(2, 8, 15)),
        ("2026-11-02 08:15:00 UTC", at(2, 8, 15), at(2, 8, 15)),
        ("2026-11-02T08:15 utc", at(2, 8, 15), at(2, 8, 15)),
    ],
)
def test_each_form_reads_as_the_time_meant(typed: str, since: datetime, deadline: datetime) -> None:
    assert times.read(typed, NOW, ahead=False) == since
    assert times.read(typed, NOW, ahead=True) == deadline


def test_clock_times_and_naive_iso_times_are_in_the_zone_given() -> None:
    # 17:00 UTC is 18:00 in the zone: its 8am today was 07:00 UTC.
    assert times.read("8am", NOW, BERLIN_WINTER, ahead=False) == at(2, 7)
    assert times.read("19:00", NOW, BERLIN_WINTER, ahead=True) == at(2, 18)
    assert times.read("2026-11-02 08:00", NOW, BERLIN_WINTER, ahead=False) == at(2, 7)
    assert times.read("2026-11-02 08:00+00:00", NOW, BERLIN_WINTER, ahead=False) == at(2, 8)
    # The zone's day, not UTC's: at 23:30 UTC it is already tomorrow there.
    late = at(2, 23, 30)
    assert times.read("today 09:00", late, BERLIN_WINTER, ahead=True) == at(3, 8)


@pytest.mark.parametrize(
    "typed",
    ["tomorrow", "yesterday-ish", "+3w", "8", "soon", "", "today x", "2026-11-02 08:15 CET"],
)
def test_anything_else_is_unreadable(typed: str) -> None:
    for ahead in (True, False):
        with pytest.raises(times.Unreadable, match="cannot read"):
            times.read(typed, NOW, ahead=ahead)


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("25:00", "25:00 is not a time of day"),
        ("13pm", "13pm is not a time of day"),
        ("today 9:75", "09:75 is not a time of day"),
        ("0am", "0am is not a time of day"),
    ],
)
def test_a_clock_time_that_is_no_time_of_day_says_so(typed: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as raised:
        times.read(typed, NOW, ahead=False)
    assert not isinstance(raised.value, times.Unreadable)


def test_span_names_only_the_relative_forms() -> None:
    assert times.span("+2h", ahead=False) == timedelta(hours=2)
    assert times.span("2h", ahead=False) == -timedelta(hours=2)
    assert times.span("2h", ahead=True) == timedelta(hours=2)
    assert times.span("-1d", ahead=True) == -timedelta(days=1)
    assert times.span("8am", ahead=True) is None
    assert times.span("2026-11-02", ahead=True) is None


moments = st.datetimes(
    min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30), timezones=st.just(UTC)
)
zones = st.integers(min_value=-12 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
clocks = st.tuples(st.integers(0, 23), st.integers(0, 59))


@given(now=moments, zone=zones, clock=clocks)
def test_a_clock_time_is_the_last_one_for_since_and_the_next_one_for_a_deadline(
    now: datetime, zone: timezone, clock: tuple[int, int]
) -> None:
    typed = f"{clock[0]}:{clock[1]:02}"
    since = times.read(typed, now, zone, ahead=False)
    deadline = times.read(typed, now, zone, ahead=True)
    assert now - timedelta(days=1) < since <= now < deadline <= now + timedelta(days=1)
    for found in (since, deadline):
        local = found.astimezone(zone)
        assert (local.hour, local.minute) == clock and found.tzinfo == UTC


@given(now=moments, count=st.integers(0, 10_000), unit=st.sampled_from("mhd"))
def test_a_signed_span_counts_the_same_either_way_and_an_unsigned_one_toward_the_time_meant(
    now: datetime, count: int, unit: str
) -> None:
    length = {"m": timedelta(minutes=count), "h": timedelta(hours=count)}.get(
        unit, timedelta(days=count)
    )
    for ahead in (True, False):
        assert times.read(f"-{count}{unit}", now, ahead=ahead) == now - length
        assert times.read(f"+{count}{unit}", now, ahead=ahead) == now + length
    assert times.read(f"{count}{unit}", now, ahead=False) == now - length
    assert times.read(f"{count}{unit}", now, ahead=True) == now + length


@given(when=moments, zone=zones)
def test_an_iso_time_reads_back_as_itself(when: datetime, zone: timezone) -> None:
    assert times.read(when.astimezone(zone).isoformat(), NOW, ahead=False) == when
    naive = when.astimezone(zone).replace(tzinfo=None).isoformat()
    assert times.read(naive, NOW, zone, ahead=True) == when


@given(when=moments, zone=zones)
def test_a_time_the_ledger_prints_reads_back_to_its_second(when: datetime, zone: timezone) -> None:
    second = when.replace(microsecond=0)
    for printed in (times.for_people(when), times.for_typing(when), times.for_machines(when)):
        for ahead in (True, False):
            read = times.read(printed, NOW, zone, ahead=ahead)
            assert read == (when if printed == times.for_machines(when) else second), printed


def test_a_time_is_written_one_way_for_people_and_one_for_machines() -> None:
    from flowledger.domain.times import for_machines, for_people

    east = timezone(timedelta(hours=2))
    for value in (
        datetime(2026, 11, 2, 14, 20, 5, 250_000, tzinfo=UTC),
        datetime(2026, 11, 2, 16, 20, 5, 250_000, tzinfo=east),
    ):
        assert for_people(value) == "2026-11-02 14:20:05 UTC"
        assert for_machines(value) == "2026-11-02T14:20:05.250000+00:00"
    assert for_machines(datetime(2026, 11, 2, 14, 20, tzinfo=UTC)) == "2026-11-02T14:20:00+00:00"
    assert for_people(datetime(2026, 11, 2, 14, 20)) == "2026-11-02 14:20:00 UTC"  # naive: UTC
    assert for_people(None) == "-"
    assert times.for_typing(datetime(2026, 11, 2, 16, 20, 5, 250_000, tzinfo=east)) == (
        "2026-11-02T14:20:05Z"
    )
