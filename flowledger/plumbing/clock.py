"""The time: ``utcnow`` is the one place the ledger reads the clock, and every service takes
a :data:`Clock` instead, so that tests move time by hand."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)
