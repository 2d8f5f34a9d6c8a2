"""Concurrency over real sockets: uvicorn on loopback (a thread on SQLite; two ``serve``
processes on one PostgreSQL database). Fifty requests are released at once by a barrier."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.models import Event, IdempotencyKey, Operation, table
from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.ledgers import new_ledger
from tests.support.receiver import (
    CLIENT_TLS,
    SECRET,
    auth,
    free_port,
    make_signing_token,
    make_token,
    patient_config_file,
    receiver_config,
    serve_process,
    server_thread,
    signature,
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
        with httpx.Client(base_url=urls[i % len(urls)], timeout=60, verify=CLIENT_TLS) as client:
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
    store = new_ledger(tmp_path / "ledger.db")
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    try:
        # deadlines no loaded machine reaches: fifty calls at once are no 503 for it
        with server_thread(create_app(ledger, config=receiver_config(), secret=SECRET)) as url:
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
    pg_ledger: str, tmp_path: Path, make: Any, check: Check
) -> None:
    store = open_store(pg_ledger)
    token = make_token(Ledger(store), "n8n")
    ports = [free_port(), free_port()]
    patient = {"FLOWLEDGER_CONFIG": str(patient_config_file(tmp_path))}
    procs = [
        serve_process(pg_ledger, p, env=patient, log=tmp_path / f"serve-{p}.log") for p in ports
    ]
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

    import flowledger.receiver.app as module

    importlib.reload(module)
    assert not any(isinstance(v, Store) for v in vars(module).values())
    assert open_store  # the store comes from the caller (the CLI's `serve`)


def test_a_truncated_body_writes_nothing_and_the_server_goes_on(
    sqlite_server: tuple[Store, str, str],
) -> None:
    store, url, token = sqlite_server
    before = snapshot(store)
    body = json.dumps(dispatch_body()).encode()
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/operations/op-1/dispatch HTTP/1.1\r\nHost: x\r\n"
            + f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n".encode()
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[: len(body) // 2]
        )
        sock.shutdown(socket.SHUT_WR)  # the client goes away mid-body
        while sock.recv(4096):
            pass
    assert snapshot(store) == before
    after = httpx.post(
        f"{url}/v1/operations/op-1/dispatch", json=dispatch_body(), headers=auth(token), timeout=60
    )
    assert after.json()["decision"] == "go"


def test_tokens_signatures_inputs_and_query_strings_never_reach_logs_or_events(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "ledger.db")
    store = new_ledger(db)
    ledger = Ledger(store)
    token = make_token(ledger, "plain")
    signer, key = make_signing_token(ledger, "signer")
    log = tmp_path / "serve.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve_process(db, port, log=log, access_log=True)
    secret_input = {"card": "INPUT-MARKER-4111"}
    try:
        wait_until_serving(url, proc)
        with httpx.Client(base_url=url, timeout=30) as client:
            client.post(
                "/v1/operations/op-1/dispatch?note=QUERY-MARKER",
                json=dispatch_body(input=secret_input),
                headers=auth(token),
            )
            raw = json.dumps(dispatch_body("exec-2", input=secret_input)).encode()
            client.post(
                "/v1/operations/op-2/dispatch",
                content=raw,
                headers={
                    **auth(signer),
                    "X-Flowledger-Signature": signature(key, "/v1/operations/op-2/dispatch", raw),
                    "Content-Type": "application/json",
                },
            )
            client.post("/v1/operations/op-3/dispatch", content=b"{bad", headers=auth(token))
            client.get("/v1/operations?after=QUERY-MARKER", headers=auth("flt_WRONG-TOKEN"))
    finally:
        stop(proc)
    text = log.read_text(errors="replace") + repr(snapshot(store))
    store.dispose()
    assert "/v1/operations/op-1/dispatch" in text  # the access log is on
    for marker in ("INPUT-MARKER", "QUERY-MARKER", token, signer, "flt_WRONG", key.hex()):
        assert marker not in text
