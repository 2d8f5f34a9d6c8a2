"""Durations as the settings take them: ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"``, ``"250ms"`` or a
number of seconds, within a century."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
MAX_DURATION = timedelta(days=36_500)
_OUT_OF_RANGE = (
    f"a duration must be at least 1 microsecond and at most {MAX_DURATION.days}d (100 years)"
)


def parse_duration(value: Any) -> timedelta:
    """``"90s"``, ``"15m"``, ``"24h"``, ``"2d"``, or a number of seconds: at least a microsecond
    once rounded (a zero lease or interval would never let a job run) and at most
    :data:`MAX_DURATION`, so that adding one to a time stays inside the calendar."""
    if isinstance(value, timedelta):
        duration = value
    else:
        seconds = _seconds(value)
        # Checked before timedelta() sees it: past its range it raises OverflowError, and NaN
        # compares false both ways.
        if not 0 < seconds <= MAX_DURATION.total_seconds():
            raise ValueError(_OUT_OF_RANGE)
        duration = timedelta(seconds=seconds)
    if not timedelta(0) < duration <= MAX_DURATION:
        raise ValueError(_OUT_OF_RANGE)
    return duration


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string such as '15m'")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer past any float
            return math.inf
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{value!r} is not a duration (use e.g. '90s', '15m', '24h', '2d')")
    return float(match.group(1)) * _UNITS[match.group(2)]


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
