"""The database unreachable: every call is ``503`` with ``Retry-After`` (never a 500, nothing
written), ``/readyz`` says not ready, and the next call once it answers again goes through.

Here the engine refuses connections; ``tests/integration/test_database_outage.py`` stops a
real PostgreSQL server under a storm."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.config import ReceiverConfig
from flowledger.receiver.api import errors
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.reads import records as queries
from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import BODY_LIMIT, SECRET, Api, make_token, retried, running

DISPATCH = "/v1/operations/op-down/dispatch"
WARM = "/v1/operations/op-warm/dispatch"


def refuse(*_: Any, **__: Any) -> Any:
    raise sa.exc.OperationalError("connect", {}, ConnectionRefusedError("connection refused"))


def assert_unavailable(answer: Any, code: str = "unavailable") -> None:
    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["code"] == code


def test_a_write_while_the_database_refuses_is_503_with_retry_after_and_then_goes(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = api.ledger.store
    before = snapshot(store)
    with monkeypatch.context() as down:
        down.setattr(store.engine, "raw_connection", refuse)  # the writer's connections
        assert_unavailable(api.post(DISPATCH, dispatch_body("exec-1")))
        confirm = api.post("/v1/operations/op-down/confirm", {"receipt": "R-1"})
        assert_unavailable(confirm)
    assert snapshot(store) == before
    answer = api.post(DISPATCH, dispatch_body("exec-1"))
    assert (answer.status_code, answer.json()["decision"]) == (200, "go")
    assert queries.operation_detail(store, "op-down") is not None


def test_reads_and_readiness_while_the_database_refuses_are_503_with_retry_after(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = api.ledger.store
    with monkeypatch.context() as down:
        down.setattr(store.engine, "raw_connection", refuse)
        down.setattr(store.reader, "connect", refuse)  # token reloads, reads, readiness
        assert_unavailable(api.get("/readyz", token=None), "not_ready")
        assert_unavailable(api.get("/v1/operations/op-down"))
        assert_unavailable(api.post(DISPATCH, dispatch_body("exec-1")))
    assert api.get("/readyz", token=None).status_code == 200


def test_an_outage_logs_one_line_for_many_failed_requests(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(errors, "_failures", errors._Throttled())
    with monkeypatch.context() as down, caplog.at_level(logging.ERROR, "flowledger.receiver"):
        down.setattr(api.ledger.store.engine, "raw_connection", refuse)
        for n in range(5):
            assert_unavailable(api.post(DISPATCH, dispatch_body(f"exec-{n}")))
    lines = [r.getMessage() for r in caplog.records if r.name == "flowledger.receiver"]
    assert lines == ["request failed: OperationalError; answered 503 with Retry-After"]


def test_a_connection_lost_inside_a_keyed_write_is_503_and_the_retry_replays_nothing_twice(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops under the Idempotency-Key's lookup (SQLAlchemy invalidates it);
    the writer's rollback must not trip over it, and the retry with the key goes through."""
    keyed = {"Idempotency-Key": "k-1"}
    real = sa.Connection.execute
    dropped: list[bool] = []

    def drop_once(self: sa.Connection, statement: Any, *args: Any, **kw: Any) -> Any:
        if not dropped:
            dropped.append(True)
            self.invalidate()  # as SQLAlchemy does on a disconnect error
            raise sa.exc.OperationalError("select", {}, ConnectionResetError("server closed"))
        return real(self, statement, *args, **kw)

    with monkeypatch.context() as down:
        down.setattr(sa.Connection, "execute", drop_once)
        assert_unavailable(api.post(DISPATCH, dispatch_body("exec-1"), headers=keyed))
    answer = api.post(DISPATCH, dispatch_body("exec-1"), headers=keyed)
    assert (answer.status_code, answer.json()["decision"]) == (200, "go")


def test_a_write_a_read_and_readiness_that_hang_are_503_within_their_deadlines_then_go(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database hangs rather than refuses: the call, a read and ``/readyz`` are answered
    at their deadlines (0.5 s; the bound asserted is for a loaded machine), not when it answers
    (after a minute, when the test lets it)."""
    tokens = {scope: make_token(ledger, scope, scope) for scope in ("write", "read")}
    config = ReceiverConfig(
        body_limit=BODY_LIMIT,
        write_deadline=timedelta(milliseconds=500),
        read_deadline=timedelta(milliseconds=500),
    )
    app = create_app(ledger, config=config, secret=SECRET, token_ttl=3600.0)
    answers = threading.Event()  # the database's, held back until the test has its own

    def hang(*_: Any, **__: Any) -> Any:
        answers.wait(60)
        return refuse()

    store = ledger.store
    with running(app, ledger, tokens) as api:
        # Every call outside the outage may pass a 0.5 s deadline on a loaded machine, and
        # is retried on 503 as a workflow would: only the outage's answers are asserted as 503.
        warm = retried(lambda: api.post(WARM, dispatch_body("exec-0")))
        assert warm.status_code == 200  # the token list is loaded
        with monkeypatch.context() as down:
            down.setattr(store.engine, "raw_connection", hang)
            down.setattr(store.reader, "connect", hang)
            try:
                started = time.monotonic()
                assert_unavailable(api.post(DISPATCH, dispatch_body("exec-1")))
                wrote = time.monotonic() - started
                started = time.monotonic()
                assert_unavailable(api.get("/readyz", token=None), "not_ready")
                ready = time.monotonic() - started
                started = time.monotonic()
                assert_unavailable(api.get("/v1/operations/op-warm"))
                looked = time.monotonic() - started
            finally:
                answers.set()
        assert max(wrote, ready, looked) < 30, (wrote, ready, looked)
        answer = retried(lambda: api.post(DISPATCH, dispatch_body("exec-1")))
        assert (answer.status_code, answer.json()["decision"]) == (200, "go")
        assert retried(lambda: api.get("/readyz", token=None)).status_code == 200
