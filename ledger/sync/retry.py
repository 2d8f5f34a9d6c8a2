"""Waiting out a tool that asked us to: 429 and 5xx back off, honouring ``Retry-After``.

The sleeper and the clock are injected, so tests see every wait and never really sleep. Waits
are bounded: a tool that asks for more than ``max_wait`` is left alone until the next run,
rather than holding a scheduler job for an hour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from connectors.base import ConnectorError

Sleep = Callable[[float], None]
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Backoff:
    """``retries`` more tries after the first, waiting ``base * 2**n`` seconds (at most
    ``cap``) unless the tool says how long."""

    retries: int = 5
    base: float = 1.0
    cap: float = 60.0
    max_wait: float = 300.0

    def delay(self, exc: ConnectorError, attempt: int, now: datetime) -> float:
        """How long to wait before try ``attempt + 1``; raises ``exc`` when it should not."""
        if not exc.retryable or attempt >= self.retries:
            raise exc
        asked = retry_after_seconds(exc.retry_after, now)
        if asked is None:
            return min(self.cap, self.base * 2**attempt)
        if asked > self.max_wait:
            raise type(exc)(
                f"{exc} and asked to wait {asked:.0f} s, over the {self.max_wait:.0f} s this "
                "sync waits; the next run tries again"
            ) from exc
        return asked


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date relative to ``now``."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
