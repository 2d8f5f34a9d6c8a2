"""Concurrency over real sockets: uvicorn on loopback (a thread on SQLite; two ``serve``
processes on one PostgreSQL database). Fifty requests are released at once by a barrier."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from ledger.migrate import init_ledger
from ledger.models import Event, IdempotencyKey, Operation, table
from ledger.receiver import create_app
from ledger.services import Ledger
from ledger.storage import Store, open_store
from tests.receiver_support import (
    SECRET,
    auth,
    dispatch_body,
    free_port,
    make_token,
    serve_process,
    server_thread,
    stop,
    wait_until_serving,
)

N = 50


def fire(
    urls: list[str], requests: list[tuple[str, dict[str, Any], dict[str, str]]]
) -> list[httpx.Response]:
    """Send every request at once (one thread each, released together); ``urls`` are used in
    turn, so with two servers half the requests go to each."""
    barrier = threading.Barrier(len(requests))
    answers: list[httpx.Response | None] = [None] * len(requests)

    def one(i: int) -> None:
        path, body, headers = requests[i]
        with httpx.Client(base_url=urls[i % len(urls)], timeout=60) as client:
            barrier.wait()
            answers[i] = client.post(path, json=body, headers=headers)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(a is not None for a in answers)
    return [a for a in answers if a is not None]


def count(store: Store, model: Any, *where: Any) -> int:
    with store.reader.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(table(model)).where(*where)
            ).scalar_one()
        )


def check_one_key_one_go(store: Store, answers: list[httpx.Response]) -> None:
    ok = [a for a in answers if a.status_code == 200]
    assert {a.status_code for a in answers} <= {200, 409}
    assert all(
        a.json()["error"]["code"] == "idempotency_in_flight"
        for a in answers
        if a.status_code == 409
    )
    assert len({a.content for a in ok}) == 1 and ok[0].json()["decision"] == "go"
    fresh = [a for a in ok if a.headers.get("idempotent-replayed") != "true"]
    assert len(fresh) == 1
    assert count(store, Operation) == 1
    assert count(store, Event, table(Event).c.kind == "dispatched") == 1
    assert count(store, IdempotencyKey) == 1


def check_exactly_one_go(store: Store, answers: list[httpx.Response]) -> None:
    assert all(a.status_code == 200 for a in answers), [
        a.text for a in answers if a.status_code != 200
    ]
    decisions = [a.json()["decision"] for a in answers]
    assert decisions.count("go") == 1
    assert {a.json()["reason"] for a in answers if a.json()["decision"] == "hold"} == {"in_flight"}
    assert count(store, Event, table(Event).c.kind == "dispatched") == 1


def same_key_requests(token: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    headers = {**auth(token), "Idempotency-Key": "one-key"}
    return [("/v1/operations/op-1/dispatch", dispatch_body("exec-1"), headers)] * N


def many_execution_requests(token: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    return [
        ("/v1/operations/op-1/dispatch", dispatch_body(f"exec-{i}"), auth(token)) for i in range(N)
    ]


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[tuple[Store, str, str]]:
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    try:
        with server_thread(create_app(ledger, secret=SECRET)) as url:
            yield store, url, token
    finally:
        store.dispose()


Check = Callable[[Store, list[httpx.Response]], None]
CASES = [(same_key_requests, check_one_key_one_go), (many_execution_requests, check_exactly_one_go)]


@pytest.mark.parametrize(("make", "check"), CASES, ids=["one-idempotency-key", "fifty-executions"])
def test_fifty_concurrent_dispatches_on_sqlite(
    sqlite_server: tuple[Store, str, str], make: Any, check: Check
) -> None:
    store, url, token = sqlite_server
    check(store, fire([url], make(token)))


@pytest.mark.postgres
@pytest.mark.parametrize(("make", "check"), CASES, ids=["one-idempotency-key", "fifty-executions"])
def test_fifty_concurrent_dispatches_on_two_servers_sharing_postgres(
    pg_url: str, tmp_path: Path, make: Any, check: Check
) -> None:
    store, _ = init_ledger(pg_url)
    token = make_token(Ledger(store), "n8n")
    ports = [free_port(), free_port()]
    procs = [serve_process(pg_url, p, log=tmp_path / f"serve-{p}.log") for p in ports]
    try:
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for url, proc in zip(urls, procs, strict=True):
            wait_until_serving(url, proc)
        check(store, fire(urls, make(token)))
    finally:
        for proc in procs:
            stop(proc)
        store.dispose()


def test_open_store_is_not_needed_at_import() -> None:
    """The app module opens nothing when imported: the factory takes an open ledger."""
    import importlib

    import ledger.receiver.app as module

    importlib.reload(module)
    assert not any(isinstance(v, Store) for v in vars(module).values())
    assert open_store  # the store comes from the caller (the CLI's `serve`)
