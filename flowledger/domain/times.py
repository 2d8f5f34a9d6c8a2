"""A time as a person reads it and as a person types it.

Written, a time has one form for people and one for machines, each made in one place:
:func:`for_people` (``2026-11-02 14:20:00 UTC``: the CLI's tables and sentences, the messages of
the services) and :func:`for_machines` (ISO 8601 in UTC, ``2026-11-02T14:20:00+00:00``, with the
second's fraction when it has one: every ``--json``, every JSON answer of the API, the alerts),
the form the events' data stores its times in, so that one JSON object never mixes two.

Read, one reading for the terminal UI's deadlines and the CLI's
``--since``, given the current time and the time zone that clock times and naive ISO times are
in (the ledger shows UTC, and passes it).

Which way a form counts depends on the time meant: ``ahead`` for a deadline, back for a start
such as ``--since``.

- ``+30m``, ``+2h``, ``+1d``: that long after now; ``-30m`` that long before. Unsigned
  (``2h``) it counts the way the time meant lies: in two hours for a deadline, two hours ago
  for ``--since``.
- ``8am``, ``8:30pm``, ``18:00``: the next such time for a deadline (today's, or tomorrow's once
  today's has passed), the last one for ``--since`` (today's, or yesterday's while today's is
  still ahead).
- ``today 18:00``, ``tomorrow 9am``, ``yesterday 18:00``: that day's, whichever way it lies.
- ISO 8601 (``2026-11-02T08:00+01:00``, ``2026-11-02 08:00``, a date alone for its midnight),
  in the time zone given unless it names its offset.
- A time as the ledger prints it for people (``2026-11-02 14:20:00 UTC``, :func:`for_people`),
  so that whatever it prints reads back.

Every time comes back in UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

_SPAN = re.compile(r"^([+-]?)\s*(\d{1,6})\s*([mhd])$", re.IGNORECASE)
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*([ap]m)?$", re.IGNORECASE)
_DAY = re.compile(r"^(yesterday|today|tomorrow)\s+(\S.*)$", re.IGNORECASE)
_DAYS = {"yesterday": -1, "today": 0, "tomorrow": 1}
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
_NAMED_UTC = re.compile(r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?)\s+UTC$", re.IGNORECASE)

# What --since takes, for its help and its refusal.
PAST_FORMS = (
    "-2h or 2h (two hours ago), -30m, 1d, 8am or 18:00 (the last one), yesterday 18:00, or ISO "
    "8601 such as 2026-11-02T08:00+01:00 (UTC unless it names its offset), or a time as the "
    "ledger prints it, 2026-11-02 08:00:00 UTC"
)


def _utc(value: datetime) -> datetime:
    """``value`` in UTC (a naive time is taken as UTC, as the ledger stores times)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def for_people(value: datetime | None) -> str:
    """A time as people read it everywhere the ledger prints one: ``2026-11-02 14:20:00 UTC``
    (to the second); ``-`` for none."""
    return "-" if value is None else _utc(value).strftime("%Y-%m-%d %H:%M:%S UTC")


def for_machines(value: datetime) -> str:
    """A time as every JSON the ledger writes gives it: ISO 8601 in UTC with ``+00:00``
    (``2026-11-02T14:20:00+00:00``, ``…:00.250000+00:00`` with a fraction), the form of the
    times in the events' data."""
    return _utc(value).isoformat()


def for_typing(value: datetime) -> str:
    """A time in a command a person will paste: ISO 8601 in UTC to the second,
    ``2026-11-02T14:20:00Z``, which every typed time reads."""
    return _utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


class Unreadable(ValueError):
    """The text is none of the forms read."""


def span(text: str, *, ahead: bool) -> timedelta | None:
    """The time from now that a relative form names (negative: before now); None when
    ``text`` is another form."""
    match = _SPAN.match(text.strip())
    if match is None:
        return None
    sign, count, unit = match.groups()
    length = timedelta(**{_UNITS[unit.lower()]: int(count)})
    back = sign == "-" or (sign == "" and not ahead)
    return -length if back else length


def read(text: str, now: datetime, tz: tzinfo = UTC, *, ahead: bool) -> datetime:
    """The time ``text`` names at ``now`` (aware), in UTC; :class:`Unreadable` when it is
    none of the forms, a ``ValueError`` naming the problem for a clock time that is no time
    of day (``25:00``)."""
    value = text.strip()
    offset = span(value, ahead=ahead)
    if offset is not None:
        return (now + offset).astimezone(UTC)
    today = now.astimezone(tz).date()
    day = _DAY.match(value)
    if day is not None:
        clock = _clock(day.group(2))
        if clock is None:
            raise Unreadable(f"cannot read {text!r} as a time")
        return _at(today + timedelta(days=_DAYS[day.group(1).lower()]), clock, tz)
    clock = _clock(value)
    if clock is not None:
        at = _at(today, clock, tz)
        if ahead and at <= now:
            return _at(today + timedelta(days=1), clock, tz)
        if not ahead and at > now:
            return _at(today - timedelta(days=1), clock, tz)
        return at
    named = _NAMED_UTC.match(value)
    if named is not None:
        value = named.group(1) + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Unreadable(f"cannot read {text!r} as a time") from None
    return (parsed.replace(tzinfo=tz) if parsed.tzinfo is None else parsed).astimezone(UTC)


def _clock(text: str) -> time | None:
    """``8am``, ``8:30pm``, ``18:00`` as a time of day; None for another form (a bare
    number is not one)."""
    match = _CLOCK.match(text.strip())
    if match is None or (match.group(2) is None and match.group(3) is None):
        return None
    hour, minute, half = int(match.group(1)), int(match.group(2) or 0), match.group(3)
    if half is not None:
        if not 1 <= hour <= 12:
            raise ValueError(f"{text.strip()} is not a time of day")
        hour = hour % 12 + (12 if half.lower() == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ValueError(f"{hour:02}:{minute:02} is not a time of day")
    return time(hour, minute)


def _at(day: date, clock: time, tz: tzinfo) -> datetime:
    return datetime.combine(day, clock, tzinfo=tz).astimezone(UTC)
