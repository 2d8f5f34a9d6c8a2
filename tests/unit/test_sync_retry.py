"""Backoff: how long a sync waits, and when it stops waiting."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connectors.base import AuthFailed, RateLimited, ServerError
from ledger.sync.retry import Backoff, retry_after_seconds

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7.0),
        (" 120 ", 120.0),
        ("Mon, 02 Nov 2026 09:01:30 GMT", 90.0),
        ("Mon, 02 Nov 2026 08:00:00 GMT", 0.0),  # a date already past: go now
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds


def test_without_retry_after_the_wait_doubles_up_to_the_cap() -> None:
    backoff = Backoff(retries=8, base=1, cap=20)
    waits = [backoff.delay(ServerError("502"), n, NOW) for n in range(7)]
    assert waits == [1, 2, 4, 8, 16, 20, 20]


def test_a_wait_the_tool_asks_for_is_honoured_within_the_bound() -> None:
    assert Backoff(max_wait=60).delay(RateLimited("429", retry_after="45"), 0, NOW) == 45
    with pytest.raises(RateLimited, match="asked to wait 61 s"):
        Backoff(max_wait=60).delay(RateLimited("429", retry_after="61"), 0, NOW)


def test_non_retryable_errors_and_spent_retries_are_raised() -> None:
    with pytest.raises(AuthFailed):
        Backoff().delay(AuthFailed("401"), 0, NOW)
    with pytest.raises(ServerError):
        Backoff(retries=2).delay(ServerError("500"), 2, NOW)
