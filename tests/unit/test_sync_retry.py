"""Backoff: how long a sync waits, and when it stops waiting."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from flowledger.connectors.base import (
    AuthFailed,
    ConnectorError,
    ConnectTimedOut,
    NoConnection,
    RateLimited,
    ServerError,
)
from flowledger.sync.retry import Backoff, retry_after_seconds

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class Tool:
    """Answers with each error in turn, then with ``"page"``; counts the calls."""

    def __init__(self, *errors: ConnectorError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "page"


def tried(backoff: Backoff, tool: Callable[[], str]) -> tuple[str, Sleeps]:
    sleeps = Sleeps()
    return backoff.retrying(sleeps, lambda: NOW)(tool), sleeps


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
    tool = Tool(*[ServerError("502")] * 7)
    answer, sleeps = tried(Backoff(retries=8, base=1, cap=20), tool)
    assert (answer, sleeps, tool.calls) == ("page", [1, 2, 4, 8, 16, 20, 20], 8)


def test_jitter_adds_at_most_its_seconds_and_stays_under_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(random, "uniform", lambda low, high: high)  # the largest jitter
    _, sleeps = tried(Backoff(base=1, cap=3, jitter=0.5), Tool(*[ServerError("503")] * 3))
    assert sleeps == [1.5, 2.5, 3]


@pytest.mark.parametrize(
    ("header", "waits"),
    [("45", [45]), ("Mon, 02 Nov 2026 09:01:30 GMT", [90]), ("90", [90])],
)
def test_a_longer_wait_the_tool_asks_for_is_honoured_within_the_bound(
    header: str, waits: list[float]
) -> None:
    _, sleeps = tried(Backoff(max_wait=90), Tool(RateLimited("429", retry_after=header)))
    assert sleeps == waits


def test_a_retry_after_shorter_than_the_backoff_waits_the_backoff() -> None:
    tool = Tool(ServerError("502"), ServerError("502"), RateLimited("429", retry_after="1"))
    _, sleeps = tried(Backoff(base=1), tool)
    assert sleeps == [1, 2, 4]


def test_a_wait_past_the_bound_is_raised_at_once_saying_so() -> None:
    tool = Tool(RateLimited("429", retry_after="61"))
    sleeps = Sleeps()
    with pytest.raises(RateLimited) as raised:
        Backoff(max_wait=60).retrying(sleeps, lambda: NOW)(tool)
    assert str(raised.value) == (
        "429 and asked to wait 61 s, over the 60 s this sync waits; the next run tries again"
    )
    assert (sleeps, tool.calls, raised.value.record) == ([], 1, None)


def test_a_non_retryable_error_is_raised_as_it_came_without_a_wait() -> None:
    refused = AuthFailed("401")
    tool = Tool(refused)
    sleeps = Sleeps()
    with pytest.raises(AuthFailed) as raised:
        Backoff().retrying(sleeps, lambda: NOW)(tool)
    assert (raised.value, sleeps, tool.calls) == (refused, [], 1)


def test_spent_retries_raise_the_last_error_as_it_came() -> None:
    last = ServerError("500", record="execution 5")
    tool = Tool(ServerError("500"), ServerError("500"), last)
    sleeps = Sleeps()
    with pytest.raises(ServerError) as raised:
        Backoff(retries=2).retrying(sleeps, lambda: NOW)(tool)
    assert (raised.value, sleeps, tool.calls) == (last, [1, 2], 3)


def test_a_refused_connection_is_tried_again_once_then_raised() -> None:
    tool = Tool(*[NoConnection("refused")] * 3)
    with pytest.raises(NoConnection, match="refused"):
        tried(Backoff(retries=5, base=1), tool)
    assert tool.calls == 2


def test_a_connection_that_timed_out_is_not_tried_again_in_the_run() -> None:
    sleeps = Sleeps()
    tool = Tool(ConnectTimedOut("nothing accepted"), ServerError("502"))
    with pytest.raises(ConnectTimedOut):
        Backoff(retries=5).retrying(sleeps, lambda: NOW)(tool)
    assert (tool.calls, sleeps) == (1, [])


def test_a_connection_back_after_one_refusal_goes_on() -> None:
    answer, sleeps = tried(Backoff(retries=5, base=1), Tool(NoConnection("refused")))
    assert (answer, sleeps) == ("page", [1])
