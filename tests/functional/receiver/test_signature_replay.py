"""A signed request is accepted once, by every receiver sharing the database (SQLite and
PostgreSQL), and housekeeping forgets a signature once its window has passed. The signature is
recorded in the transaction of the write it authorises: a replay in one batch with good
requests refuses the replay alone, and a refused write keeps its signature recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from flowledger.domain import IllegalTransition
from flowledger.receiver.api.auth import Once
from flowledger.receiver.api.errors import ApiError
from flowledger.receiver.api.tokens import create_token
from flowledger.receiver.app import create_app
from flowledger.scheduled.housekeeping import expire_signatures
from flowledger.services.ledger import Ledger, Tx
from flowledger.storage.engine import open_store
from flowledger.storage.models import Operation, SeenSignature, table
from flowledger.storage.signatures import record
from tests.support.builders import FakeClock, dispatch_body, req
from tests.support.receiver import SECRET, make_signing_token, receiver_config, running, signature

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
            app = create_app(each, config=receiver_config(), secret=SECRET, token_ttl=0.0)
            with running(app, each, {}) as api:
                answers.append(api.post(DISPATCH, token=None, headers=headers, content=body))
    finally:
        other_store.dispose()
    assert answers[0].status_code == 200, answers[0].text
    assert answers[1].status_code == 401
    assert answers[1].json()["error"]["code"] == "replayed_signature"


def remember(ledger: Ledger, signature: str, expires_at: datetime) -> bool:
    """Record ``signature`` as the receiver does, in a transaction of its own; False for a
    replay."""
    seen: list[Callable[[], bool]] = []
    ledger.run("test", lambda tx: seen.append(record(tx, signature, expires_at)))
    return seen[0]()


def test_housekeeping_forgets_signatures_past_their_window(ledger: Ledger) -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert remember(ledger, "a" * 64, now - timedelta(seconds=1))
    assert remember(ledger, "b" * 64, now + timedelta(minutes=5))
    assert not remember(ledger, "b" * 64, now + timedelta(minutes=5))
    assert expire_signatures(ledger.store, FakeClock(now), batch=1) == 1
    assert remember(ledger, "a" * 64, now + timedelta(minutes=5))
    assert not remember(ledger, "b" * 64, now + timedelta(minutes=5))


def _signed(key: bytes, token: str, path: str, body: bytes) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "X-Flowledger-Signature": signature(key, path, body),
        "Content-Type": "application/json",
    }


def _seen(ledger: Ledger) -> list[str]:
    with ledger.store.reader.connect() as conn:
        return list(conn.execute(sa.select(table(SeenSignature).c.signature)).scalars())


def _operations(ledger: Ledger) -> dict[str, str]:
    ops = table(Operation)
    with ledger.store.reader.connect() as conn:
        return {r.operation_id: r.state for r in conn.execute(sa.select(ops))}


def test_one_signed_request_sent_to_two_receivers_at_once_is_accepted_once(
    ledger: Ledger, db_url: str
) -> None:
    """Both receivers (each its own writer and store) get the request at the same time; the
    primary key decides, whichever commits first: one 200, one 401, one recorded signature."""
    token, key = make_signing_token(ledger, "signer")
    body = json.dumps(dispatch_body()).encode()
    headers = _signed(key, token, DISPATCH, body)
    other_store = open_store(db_url)
    other = Ledger(other_store)
    try:
        apps = [
            create_app(each, config=receiver_config(), secret=SECRET, token_ttl=0.0)
            for each in (ledger, other)
        ]
        with (
            running(apps[0], ledger, {}) as one,
            running(apps[1], other, {}) as two,
            ThreadPoolExecutor(2) as pool,
        ):
            sent = [
                pool.submit(api.post, DISPATCH, token=None, headers=headers, content=body)
                for api in (one, two)
            ]
            answers = [f.result() for f in sent]
    finally:
        other_store.dispose()
    assert sorted(a.status_code for a in answers) == [200, 401], [a.text for a in answers]
    refused = next(a for a in answers if a.status_code == 401)
    assert refused.json()["error"]["code"] == "replayed_signature"
    assert len(_seen(ledger)) == 1
    assert _operations(ledger) == {"op-1": "dispatching"}


def test_a_signed_request_sent_many_times_at_once_to_one_receiver_is_accepted_once(
    ledger: Ledger,
) -> None:
    """Sent together, the copies share the writer's batches: one is accepted, every other is
    refused as a replay, whether in the same batch or a later one."""
    token, key = make_signing_token(ledger, "signer")
    body = json.dumps(dispatch_body()).encode()
    headers = _signed(key, token, DISPATCH, body)
    app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with running(app, ledger, {}) as api, ThreadPoolExecutor(8) as pool:
        sent = [
            pool.submit(api.post, DISPATCH, token=None, headers=headers, content=body)
            for _ in range(16)
        ]
        answers = [f.result() for f in sent]
    codes = sorted(a.status_code for a in answers)
    assert codes == [200] + [401] * 15, [a.text for a in answers]
    assert {a.json()["error"]["code"] for a in answers if a.status_code == 401} == {
        "replayed_signature"
    }
    assert len(_seen(ledger)) == 1


def test_a_replay_in_a_batch_refuses_only_the_replay(ledger: Ledger) -> None:
    until = datetime.now(UTC) + timedelta(minutes=5)
    first, second = "a" * 64, "b" * 64
    outcomes = ledger.run_many(
        [
            ("token:a", ledger.dispatch("op-1", req("exec-1")).work),
            ("token:a", ledger.dispatch("op-2", req("exec-2")).work),  # carries op-1's signature
            ("token:a", ledger.dispatch("op-3", req("exec-3")).work),
            ("token:a", ledger.dispatch("op-4", req("exec-4")).work),  # not signed
        ],
        [Once(first, until), Once(first, until), Once(second, until), None],
    )
    assert [o.value.decision if o.value else None for o in outcomes] == ["go", None, "go", "go"]
    error = outcomes[1].error
    assert isinstance(error, ApiError) and error.code == "replayed_signature", error
    assert _operations(ledger) == {
        "op-1": "dispatching",
        "op-3": "dispatching",
        "op-4": "dispatching",
    }
    assert sorted(_seen(ledger)) == [first, second]
    # Committed: a later batch refuses it too.
    again = ledger.run_many(
        [("token:a", ledger.dispatch("op-5", req("exec-5")).work)], [Once(second, until)]
    )
    assert isinstance(again[0].error, ApiError)
    assert "op-5" not in _operations(ledger)


def test_a_refused_write_keeps_its_signature_recorded(ledger: Ledger) -> None:
    """A signed confirm refused now (nothing dispatched) could be accepted later, once the
    operation is dispatched: its signature stays recorded, so it cannot be sent again."""
    until = datetime.now(UTC) + timedelta(minutes=5)

    def refused(tx: Tx) -> None:
        ledger.dispatch("op-9", req("exec-9")).work(tx)  # writes, then...
        raise IllegalTransition("refused after writing")

    outcomes = ledger.run_many(
        [("token:a", refused), ("token:a", ledger.dispatch("op-1", req("exec-1")).work)],
        [Once("c" * 64, until), Once("d" * 64, until)],
    )
    assert isinstance(outcomes[0].error, IllegalTransition)
    assert outcomes[1].value.decision == "go"
    assert _operations(ledger) == {"op-1": "dispatching"}
    assert sorted(_seen(ledger)) == ["c" * 64, "d" * 64]


def test_a_signed_read_is_accepted_once(ledger: Ledger) -> None:
    made = create_token(ledger, "reader", "read", signing=True, server_secret=SECRET)
    assert made.signing_secret is not None
    token, key = made.token, bytes.fromhex(made.signing_secret)
    path = "/v1/operations/op-1"
    headers = {
        "Authorization": f"Bearer {token}",
        "X-Flowledger-Signature": signature(key, path, b"", method="GET"),
    }
    app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with running(app, ledger, {}) as api:
        first = api.get(path, token=None, headers=headers)
        again = api.get(path, token=None, headers=headers)
    assert first.status_code == 404, first.text  # let in: the operation is unknown
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "replayed_signature"
    assert len(_seen(ledger)) == 1
