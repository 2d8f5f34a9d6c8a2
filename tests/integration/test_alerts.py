"""Alerts: written with the hold, delivered with a stable id, retried with backoff."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.config import AlertsConfig, SweepConfig
from flowledger.domain import FailOutcome
from flowledger.domain.staleness import stale_prepared_hold
from flowledger.scheduled.alerts import DELIVERY_HEADER, Deliverer, backoff
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.services.outbox import target_of
from flowledger.storage.engine import Store
from flowledger.storage.models import Outbox, table
from tests.support.builders import T0, FakeClock, req
from tests.support.webhook import AlertReceiver

OUTBOX = table(Outbox)
OP = "invoice:INV-42:send"


def outbox(store: Store) -> list[Any]:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(OUTBOX).order_by(OUTBOX.c.id)).all()


@pytest.fixture
def receiver() -> Iterator[AlertReceiver]:
    r = AlertReceiver()
    yield r
    r.close()


def alerting(store: Store, clock: FakeClock, *urls: str) -> Ledger:
    return Ledger(store, clock=clock, alert_urls=urls)


def test_each_new_hold_queues_one_alert_per_url_in_its_transaction(
    store: Store, clock: FakeClock
) -> None:
    ledger = alerting(store, clock, "http://127.0.0.1:1/a", "https://chat.example/hook/SECRET")
    ledger.dispatch(OP, req()).run("wf")
    assert outbox(store) == []
    answer = ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    rows = outbox(store)
    assert len(rows) == 2
    assert {r.delivery_id for r in rows} == {
        f"hold:{answer.hold_ids[0]}:{target_of('http://127.0.0.1:1/a')}",
        f"hold:{answer.hold_ids[0]}:{target_of('https://chat.example/hook/SECRET')}",
    }
    assert all("SECRET" not in r.payload and "chat.example" not in r.payload for r in rows)
    body = json.loads(rows[0].payload)["body"]
    assert body["kind"] == "hold_opened" and body["hold"]["reason"] == "unknown_outcome"
    assert body["delivery_id"] == rows[0].delivery_id


def test_without_alert_urls_no_outbox_row_is_written(ledger: Ledger) -> None:
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    assert outbox(ledger.store) == []


def test_an_overdue_hold_is_alerted_as_overdue(store: Store, clock: FakeClock) -> None:
    ledger = alerting(store, clock, "http://127.0.0.1:1/a")
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    clock.advance(hours=2)
    Sweep(ledger, SweepConfig()).run()
    kinds = [r.kind for r in outbox(store)]
    assert kinds == ["hold_opened", "hold_overdue"]
    body = json.loads(outbox(store)[1].payload)["body"]
    assert body["hold"]["refers_to"] is not None


def test_delivery_posts_the_stable_id_in_header_and_body_and_marks_it(
    store: Store, clock: FakeClock, receiver: AlertReceiver
) -> None:
    ledger = alerting(store, clock, receiver.url)
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    deliverer = Deliverer(store, AlertsConfig(urls=[receiver.url]), clock=clock)
    assert deliverer.deliver_due().sent == 1
    assert deliverer.deliver_due().sent == 0
    deliverer.close()
    (row,) = outbox(store)
    assert row.delivered_at == clock.now and row.attempts == 1
    ((header_id, body),) = receiver.deliveries
    assert header_id == body["delivery_id"] == row.delivery_id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_receiver_that_is_down_gets_the_alert_once_it_is_back(
    store: Store, clock: FakeClock
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/hook"
    ledger = alerting(store, clock, url)
    ledger.dispatch(OP, req()).run("wf")
    ledger.fail(OP, FailOutcome.UNKNOWN, "timeout").run("wf")
    deliverer = Deliverer(store, AlertsConfig(urls=[url]), clock=clock)
    assert deliverer.deliver_due().failed == 1
    (row,) = outbox(store)
    assert row.attempts == 1 and row.delivered_at is None
    assert row.last_error == "ConnectError" and str(port) not in row.last_error
    assert row.next_attempt_at == clock.now + timedelta(seconds=5)
    back = AlertReceiver(port=port)
    try:
        assert deliverer.deliver_due().sent == 0  # not due yet: backing off
        clock.advance(seconds=5)
        assert deliverer.deliver_due().sent == 1
    finally:
        back.close()
        deliverer.close()
    assert back.ids == [row.delivery_id]
    assert outbox(store)[0].delivered_at is not None


def test_an_error_answer_is_retried_with_a_doubling_capped_backoff(
    store: Store, clock: FakeClock
) -> None:
    url = "http://alerts.test/hook"
    answers = [503, 500, 200]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers[DELIVERY_HEADER])
        return httpx.Response(answers.pop(0))

    ledger = alerting(store, clock, url)
    ledger.open_hold(_stale_hold()).run("test")
    client = httpx.Client(transport=httpx.MockTransport(handler))
    deliverer = Deliverer(store, AlertsConfig(urls=[url]), client=client, clock=clock)
    assert deliverer.deliver_due().failed == 1
    assert outbox(store)[0].last_error == "HTTP 503"
    clock.advance(seconds=5)
    assert deliverer.deliver_due().failed == 1
    assert outbox(store)[0].next_attempt_at == clock.now + timedelta(seconds=10)
    clock.advance(seconds=10)
    assert deliverer.deliver_due().sent == 1
    assert len(set(seen)) == 1 and len(seen) == 3
    assert backoff(1, timedelta(minutes=30)) == timedelta(seconds=5)
    assert backoff(40, timedelta(minutes=30)) == timedelta(minutes=30)


def test_an_alert_for_a_url_no_longer_configured_waits_and_is_not_lost(
    store: Store, clock: FakeClock
) -> None:
    ledger = alerting(store, clock, "http://old.test/hook")
    ledger.open_hold(_stale_hold()).run("test")
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    deliverer = Deliverer(store, AlertsConfig(urls=["http://new.test/hook"]), client=client)
    assert deliverer.deliver_due().unroutable == 1
    (row,) = outbox(store)
    assert row.delivered_at is None and row.attempts == 0
    assert row.last_error == "the alert URL is no longer configured"


def _stale_hold() -> Any:
    return stale_prepared_hold("op-1", 0, T0)


def test_a_damaged_outbox_row_is_set_aside_and_the_next_alert_still_goes(
    store: Store, clock: FakeClock, receiver: AlertReceiver
) -> None:
    ledger = alerting(store, clock, receiver.url)
    ledger.open_hold(_stale_hold()).run("test")
    with store.engine.begin() as conn:
        conn.execute(
            OUTBOX.insert().values(
                delivery_id="junk",
                kind="hold_opened",
                payload="{not json",
                created_at=clock.now - timedelta(hours=1),
                next_attempt_at=clock.now - timedelta(hours=1),
            )
        )
    deliverer = Deliverer(store, AlertsConfig(urls=[receiver.url]), clock=clock, batch=1)
    result = deliverer.deliver_due()
    deliverer.close()
    assert (result.sent, result.unroutable) == (1, 1)
    junk = next(r for r in outbox(store) if r.delivery_id == "junk")
    assert (
        junk.delivered_at is None and junk.last_error == "the outbox row is not a flowledger alert"
    )
