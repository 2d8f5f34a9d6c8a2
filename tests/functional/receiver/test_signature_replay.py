"""A signed request is accepted once, by every receiver sharing the database (SQLite and
PostgreSQL), and housekeeping forgets a signature once its window has passed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from ledger.config import ReceiverConfig
from ledger.receiver import create_app
from ledger.scheduled.housekeeping import expire_signatures
from ledger.storage.engine import open_store
from ledger.writer.services import Ledger
from ledger.writer.signatures import remember
from tests.support.builders import FakeClock, dispatch_body
from tests.support.receiver import SECRET, make_signing_token, running, signature

DISPATCH = "/v1/operations/op-1/dispatch"


def test_a_signed_request_replayed_to_another_receiver_is_refused(
    ledger: Ledger, db_url: str
) -> None:
    token, key = make_signing_token(ledger, "signer")
    body = json.dumps(dispatch_body()).encode()
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Flowledger-Signature": signature(key, DISPATCH, body),
        "Content-Type": "application/json",
    }
    other_store = open_store(db_url)
    other = Ledger(other_store)
    try:
        answers = []
        for each in (ledger, other):
            app = create_app(each, config=ReceiverConfig(), secret=SECRET, token_ttl=0.0)
            with running(app, each, {}) as api:
                answers.append(api.post(DISPATCH, token=None, headers=headers, content=body))
    finally:
        other_store.dispose()
    assert answers[0].status_code == 200, answers[0].text
    assert answers[1].status_code == 401
    assert answers[1].json()["error"]["code"] == "replayed_signature"


def test_housekeeping_forgets_signatures_past_their_window(ledger: Ledger) -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert remember(ledger.store, "a" * 64, now - timedelta(seconds=1))
    assert remember(ledger.store, "b" * 64, now + timedelta(minutes=5))
    assert not remember(ledger.store, "b" * 64, now + timedelta(minutes=5))
    assert expire_signatures(ledger.store, FakeClock(now), batch=1) == 1
    assert remember(ledger.store, "a" * 64, now + timedelta(minutes=5))
    assert not remember(ledger.store, "b" * 64, now + timedelta(minutes=5))
