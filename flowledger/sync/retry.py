"""Waiting out a tool that asked us to: 429 and 5xx back off, honouring ``Retry-After``.

The loop is tenacity's; this module holds the policy: what is retried, how long each wait is,
and when to give up. The sleeper and the clock are injected, so tests see every wait and never
really sleep. Waits are bounded: a tool that asks for more than ``max_wait`` is left alone until
the next run, rather than holding a scheduler job for an hour. A tool that cannot be
connected to at all (refused, no such host, nothing accepting within the connect timeout) is
tried again at most ``connect_retries`` times: that is a tool down or a wrong ``base_url``,
not a blip, and ``sync --once`` says so in seconds instead of backing off for half a minute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import NoReturn

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential_jitter

from flowledger.connectors.base import ConnectorError, ConnectTimedOut, NoConnection

Sleep = Callable[[float], None]
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Backoff:
    """``retries`` more tries after the first. The first wait is ``base`` seconds and each next
    one twice as long, plus up to ``jitter`` seconds at random, at most ``cap``; or what
    ``Retry-After`` asks, when that is longer. A failure to connect is tried again at most
    ``connect_retries`` times, and one that timed out connecting not at all (its wait was the
    connect timeout)."""

    retries: int = 5
    connect_retries: int = 1
    base: float = 1.0
    cap: float = 60.0
    max_wait: float = 300.0
    # Off unless asked for: one process (the leaseholder) syncs a source, so there is no
    # crowd of clients whose retries need spreading out.
    jitter: float = 0.0

    def retrying(self, sleep: Sleep, clock: Clock) -> Retrying:
        """A tenacity controller: call it with the function to try. A retryable
        :class:`ConnectorError` is tried again; any other error, and a retryable one whose
        tries are spent, is raised as it came; one asking to wait past ``max_wait`` is raised
        as a new error of its type that says so."""
        return Retrying(
            retry=retry_if_exception(_retryable),
            wait=_ToldOrExponential(self, clock),
            stop=stop_after_attempt(self.retries + 1)
            | _AskedTooLong(self.max_wait, clock)
            | _NoConnection(self.connect_retries),
            sleep=sleep,
            retry_error_callback=lambda state: self._give_up(state, clock),
        )

    def _give_up(self, state: RetryCallState, clock: Clock) -> NoReturn:
        exc = _failure(state)
        asked = _asked(state, clock)
        if state.attempt_number > self.retries or asked is None or asked <= self.max_wait:
            raise exc  # its tries are spent (all of them, or a connection's fewer)
        raise type(exc)(
            f"{exc} and asked to wait {asked:.0f} s, over the {self.max_wait:.0f} s this "
            "sync waits; the next run tries again"
        ) from exc


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


class _ToldOrExponential(wait_base):
    """The longer of what the tool asked for and the exponential wait, never past
    ``max_wait`` (a longer request stops the retries instead, see :class:`_AskedTooLong`)."""

    def __init__(self, backoff: Backoff, clock: Clock) -> None:
        self.exponential = wait_exponential_jitter(
            multiplier=backoff.base, max=backoff.cap, jitter=backoff.jitter
        )
        self.max_wait = backoff.max_wait
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> float:
        told = _asked(retry_state, self.clock) or 0.0
        return min(self.max_wait, max(told, self.exponential(retry_state)))


class _AskedTooLong(stop_base):
    def __init__(self, max_wait: float, clock: Clock) -> None:
        self.max_wait = max_wait
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        asked = _asked(retry_state, self.clock)
        return asked is not None and asked > self.max_wait


class _NoConnection(stop_base):
    def __init__(self, retries: int) -> None:
        self.retries = retries

    def __call__(self, retry_state: RetryCallState) -> bool:
        exc = _failure(retry_state)
        if isinstance(exc, ConnectTimedOut):
            return True
        return isinstance(exc, NoConnection) and retry_state.attempt_number > self.retries


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ConnectorError) and exc.retryable


def _failure(state: RetryCallState) -> ConnectorError:
    assert state.outcome is not None
    exc = state.outcome.exception()
    assert isinstance(exc, ConnectorError)  # only these are retried
    return exc


def _asked(state: RetryCallState, clock: Clock) -> float | None:
    return retry_after_seconds(_failure(state).retry_after, clock())
