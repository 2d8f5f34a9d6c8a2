"""Delivering alerts from the outbox to the configured webhook URLs.

At least once, never lost: a row is marked delivered only after the receiver answered 2xx, so
a crash between the two sends it again; the body and the ``X-Flowledger-Delivery`` header carry
the same ``delivery_id`` every time, so the receiver drops the duplicate. A receiver that is
down or answers an error is tried again later with a doubling backoff (``attempts``,
``next_attempt_at``, ``last_error``). Errors are recorded as a status or an exception name,
never with the URL (a webhook URL often holds a secret).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx

from flowledger.config import AlertsConfig
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.plumbing.faults import crashpoint
from flowledger.services.outbox import targets_of
from flowledger.storage import outbox
from flowledger.storage.engine import Store

DELIVERY_HEADER = "X-Flowledger-Delivery"
FIRST_BACKOFF = timedelta(seconds=5)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeliveryResult:
    sent: int = 0
    failed: int = 0
    unroutable: int = 0


def backoff(attempts: int, cap: timedelta, first: timedelta = FIRST_BACKOFF) -> timedelta:
    """5 s, 10 s, 20 s, ... up to ``cap`` after the ``attempts``-th failure."""
    return min(cap, first * (2 ** min(max(attempts - 1, 0), 30)))


class Deliverer:
    """Sends due outbox rows; ``client`` is injectable (``httpx.MockTransport`` in tests)."""

    def __init__(
        self,
        store: Store,
        cfg: AlertsConfig,
        *,
        client: httpx.Client | None = None,
        clock: Clock = utcnow,
        batch: int = 100,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.urls = targets_of(cfg.urls)
        self.client = client or httpx.Client(
            timeout=cfg.timeout.total_seconds(), follow_redirects=False
        )
        self.clock = clock
        self.batch = batch

    def close(self) -> None:
        self.client.close()

    def deliver_due(self) -> DeliveryResult:
        """Send every row due now, ``batch`` at a time, oldest first."""
        sent = failed = unroutable = 0
        while True:
            rows = self._due(self.clock())
            for row in rows:
                outcome = self._deliver(row)
                sent += outcome == "sent"
                failed += outcome == "failed"
                unroutable += outcome == "unroutable"
            if len(rows) < self.batch:
                break
        if sent or failed:
            log.info("alerts: %d delivered, %d to retry", sent, failed)
        return DeliveryResult(sent, failed, unroutable)

    def _due(self, now: datetime) -> Sequence[Any]:
        with self.store.reader.connect() as conn:
            return outbox.due(conn, now, self.batch)

    def _deliver(self, row: Any) -> str:
        try:
            payload = json.loads(row.payload)
            target, body = payload["target"], json.dumps(payload["body"], sort_keys=True)
        except (ValueError, TypeError, KeyError):
            # Written by hand or damaged: keep it for a person, and let the others through.
            self._retry(row, "the outbox row is not a flowledger alert", count=False)
            return "unroutable"
        url = self.urls.get(target)
        if url is None:
            # The URL was removed from [alerts] urls: keep the row, look again later.
            self._retry(row, "the alert URL is no longer configured", count=False)
            return "unroutable"
        headers = {"Content-Type": "application/json", DELIVERY_HEADER: row.delivery_id}
        try:
            # Streamed and never read: only the status matters, whatever size the answer.
            with self.client.stream("POST", url, content=body, headers=headers) as response:
                status = response.status_code
            error = None if 200 <= status < 300 else f"HTTP {status}"
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        if error is not None:
            self._retry(row, error)
            return "failed"
        crashpoint("after_alert_sent")
        with self.store.engine.begin() as conn:
            outbox.mark_delivered(conn, row.id, self.clock())
        return "sent"

    def _retry(self, row: Any, error: str, *, count: bool = True) -> None:
        attempts = row.attempts + 1 if count else row.attempts
        wait = backoff(attempts, self.cfg.max_backoff) if count else self.cfg.max_backoff
        with self.store.engine.begin() as conn:
            outbox.retry_later(conn, row.id, attempts=attempts, at=self.clock() + wait, error=error)
