"""PostgreSQL restarted under a 64-client storm: while it is down the receiver answers
``503`` with ``Retry-After`` (never a 500) and ``/readyz`` says not ready; it comes back by
itself, every ``2xx`` it gave is in the database, and each operation had one ``go``.

The server is stopped once the storm is under way (a number of answers received) and started
again once the receiver has answered a ``503`` and ``/readyz`` said not ready: conditions, not
sleeps. It is the whole test server that restarts, so this runs rarely: deselect it with
``-m "not pg_restart"``; it skips without ``pg_ctlcluster`` (or root) and without
``FLOWLEDGER_TEST_PG_URL``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import Operation, table
from tests.conftest import PG_URL
from tests.support.builders import dispatch_body
from tests.support.receiver import (
    auth,
    free_port,
    make_token,
    serve_process,
    stop,
    wait_until_serving,
)

pytestmark = [pytest.mark.postgres, pytest.mark.pg_restart]

CLIENTS = 64
OPERATIONS = 4  # at least, per pair of clients: both dispatch each of them, one wins
BEFORE_STOP = 150  # answers received before the server is stopped
AFTER_START = 150  # answers of 200 received once it is back, before the storm ends
BOUND = 120.0  # seconds: a bound for a loaded machine, never a wait


@pytest.fixture
def cluster() -> list[str]:
    """How to stop and start the test server (``pg_ctlcluster``), or a skip."""
    if not PG_URL:
        pytest.skip("PostgreSQL not configured: set FLOWLEDGER_TEST_PG_URL")
    tool = shutil.which("pg_ctlcluster")
    if tool is None or os.geteuid() != 0 or not Path("/etc/postgresql").is_dir():
        pytest.skip("restarting PostgreSQL needs pg_ctlcluster and root")
    versions = sorted(os.listdir("/etc/postgresql"))
    if len(versions) != 1:
        pytest.skip(f"expected one PostgreSQL cluster version, found {versions}")
    return [tool, "--skip-systemctl-redirect", versions[0], "main"]


def _pg_ctl(cluster: list[str], action: str) -> None:
    subprocess.run([*cluster, action], check=True, capture_output=True, timeout=BOUND)


@dataclass
class Log:
    """Every answer the clients received, and a condition to wait on for what they saw."""

    answers: list[tuple[str, str, str, httpx.Response]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    errors: list[BaseException] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)  # the storm may end

    def add(self, op: str, execution: str, call: str, answer: httpx.Response) -> None:
        with self.changed:
            self.answers.append((op, execution, call, answer))
            self.changed.notify_all()

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: condition() or bool(self.errors), BOUND):
                raise AssertionError(f"timed out waiting for {what}")
        assert not self.errors, self.errors

    def count(self, status: int) -> int:
        return sum(1 for *_, a in self.answers if a.status_code == status)


def _post(
    client: httpx.Client, log: Log, op: str, execution: str, call: str, body: dict[str, Any]
) -> httpx.Response:
    """POST until the answer is not 503, with one Idempotency-Key for every try: the same
    request again, as a client that was told to retry sends it."""
    key = f"{execution}:{op}:{call}"
    deadline = time.monotonic() + BOUND
    while True:
        answer = client.post(
            f"/v1/operations/{op}/{call}", json=body, headers={"Idempotency-Key": key}
        )
        log.add(op, execution, call, answer)
        if answer.status_code != 503:
            return answer
        assert time.monotonic() < deadline, f"{op} {call} still 503 after {BOUND} s"
        time.sleep(0.02)  # pacing the retries, not synchronising anything


def _client(url: str, token: str, number: int, log: Log) -> None:
    execution = f"exec-{number}"
    try:
        with httpx.Client(base_url=url, headers=auth(token), timeout=BOUND) as client:
            k = 0
            while k < OPERATIONS or not log.done.is_set():  # on until after the restart
                op = f"op-{number // 2}-{k}"
                k += 1
                answer = _post(client, log, op, execution, "dispatch", dispatch_body(execution))
                if answer.status_code == 200 and answer.json()["decision"] == "go":
                    body = {"receipt": f"R-{op}", "execution_id": execution}
                    _post(client, log, op, execution, "confirm", body)
    except BaseException as exc:
        with log.changed:
            log.errors.append(exc)
            log.changed.notify_all()


def _ready(url: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", timeout=10)


def _wait_until_ready(url: str) -> None:
    """Poll ``/readyz`` until it says ready (bounded)."""
    deadline = time.monotonic() + BOUND
    while _ready(url).status_code != 200:
        assert time.monotonic() < deadline, "the receiver never became ready again"
        time.sleep(0.05)


@pytest.fixture
def receiver(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    store, _ = init_ledger(pg_url)
    token = make_token(Ledger(store), "storm")
    store.dispose()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve_process(pg_url, port, log=tmp_path / "serve.log")
    try:
        wait_until_serving(url, proc)
        yield pg_url, url, token
    finally:
        stop(proc)


def test_a_postgresql_restart_during_a_storm_is_503_then_recovers_with_every_answer_durable(
    cluster: list[str], receiver: tuple[str, str, str]
) -> None:
    db, url, token = receiver
    log = Log()
    clients = [
        threading.Thread(target=_client, args=(url, token, n, log), daemon=True)
        for n in range(CLIENTS)
    ]
    for t in clients:
        t.start()
    started = False
    try:
        log.wait_for(f"{BEFORE_STOP} answers", lambda: len(log.answers) >= BEFORE_STOP)
        _pg_ctl(cluster, "stop")
        stopped_at = len(log.answers)
        log.wait_for("a 503 while PostgreSQL is down", lambda: log.count(503) > 0)
        down = _ready(url)
        _pg_ctl(cluster, "start")
        started = True
        _wait_until_ready(url)
        started_at = len(log.answers)
        log.wait_for(
            f"{AFTER_START} answers of 200 after the restart",
            lambda: sum(a.status_code == 200 for *_, a in log.answers[started_at:]) >= AFTER_START,
        )
    finally:
        log.done.set()
        if not started:
            _pg_ctl(cluster, "start")
    assert down.status_code == 503 and down.headers["retry-after"]
    assert down.json()["error"]["code"] == "not_ready"
    for t in clients:
        t.join(BOUND)
    assert not any(t.is_alive() for t in clients), "a client never finished"
    assert not log.errors, log.errors
    assert _ready(url).status_code == 200

    statuses = {a.status_code for *_, a in log.answers}
    assert statuses <= {200, 503}, statuses  # never a 500, nor anything but an answer or 503
    assert stopped_at < len(log.answers)
    for *_, answer in log.answers:
        if answer.status_code == 503:
            assert answer.headers["retry-after"] and answer.json()["error"]["code"]
    assert log.count(503) > 0
    after = [a for *_, a in log.answers[stopped_at:] if a.status_code == 200]
    assert after, "no request succeeded after PostgreSQL came back"

    final = {(op, ex, call): a for op, ex, call, a in log.answers if a.status_code == 200}
    goes: dict[str, set[str]] = {}
    for (op, ex, call), answer in final.items():
        if call == "dispatch" and answer.json()["decision"] == "go":
            goes.setdefault(op, set()).add(ex)
    operations = {op for op, ex, call in final if call == "dispatch"}
    assert len(operations) >= CLIENTS // 2 * OPERATIONS
    assert set(goes) == operations
    assert all(len(winners) == 1 for winners in goes.values()), goes

    durable = _operations(db)
    for op, (winner,) in ((op, tuple(w)) for op, w in goes.items()):
        confirmed = final[(op, winner, "confirm")].json()
        assert confirmed["state"] == "confirmed"
        assert durable[op] == ("confirmed", winner, f"R-{op}"), op


def _operations(db: str) -> dict[str, tuple[str, str | None, str | None]]:
    store = open_store(db)
    try:
        ops = table(Operation)
        with store.reader.connect() as conn:
            rows = conn.execute(
                sa.select(ops.c.operation_id, ops.c.state, ops.c.execution_id, ops.c.receipt)
            ).all()
        return {r.operation_id: (r.state, r.execution_id, r.receipt) for r in rows}
    finally:
        store.dispose()
