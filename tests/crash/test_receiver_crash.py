"""SIGKILL the receiver, or its writer process, while a group commit is in flight, restart, and
check that no answer was a lie: every ``go`` sent is ``dispatching`` in the database, every
confirm answered is confirmed, and nothing unanswered was made ``confirmed`` by a dispatch.
Killing the receiver takes its writer process with it; killing the writer process gets every
call it had not answered a 503, and the receiver exits non-zero, saying why.

On both databases; on PostgreSQL ``batch_unit_queued`` kills the writer while a unit's
statements are still queued in its pipeline. The crash is placed, not timed: ten sequential
dispatches make exactly ten commits, so ``FLOWLEDGER_CRASH_SKIP=10`` stops the writer inside
the eleventh — the first batch of a burst of concurrent requests — and the test kills the
process once the signal file says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.models import Operation, table
from flowledger.storage.reads import chain
from tests.support.builders import dispatch_body
from tests.support.processes import wait_until
from tests.support.receiver import (
    CLIENT_TLS,
    auth,
    free_port,
    make_token,
    patient_config_file,
    serve_process,
    stop,
    wait_until_serving,
)

pytestmark = pytest.mark.crash
SEQUENTIAL = 10
BURST = 30


def _wait_for(path: Path, proc: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, "serve exited before reaching the crash point"
        assert time.monotonic() < deadline, "the crash point was never reached"
        time.sleep(0.01)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def _gone(pid: int) -> bool:
    """Ended (reaped, or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in "ZX"
    except FileNotFoundError:
        return True


def _states(db: str) -> dict[str, tuple[str, int, str | None]]:
    store = open_store(db)
    try:
        with store.reader.connect() as conn:
            ops = table(Operation)
            rows = conn.execute(
                sa.select(ops.c.operation_id, ops.c.state, ops.c.attempt, ops.c.receipt)
            )
            return {r.operation_id: (r.state, r.attempt, r.receipt) for r in rows}
    finally:
        store.dispose()


@pytest.mark.parametrize("killed", ["receiver", "writer"])
@pytest.mark.parametrize(
    "point", ["batch_unit_queued", "batch_before_commit", "batch_after_commit"]
)
def test_sigkill_during_a_group_commit_never_contradicts_an_answer(
    tmp_path: Path, db_url: str, store: Store, point: str, killed: str
) -> None:
    db = db_url
    token = make_token(Ledger(store), "n8n")
    store.dispose()
    signal_file = tmp_path / "crashed"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Deadlines no loaded machine reaches: a call waiting on the writer stopped at its crash
    # point is answered when a process is killed, never 503 first because the kill came late.
    patient = {"FLOWLEDGER_CONFIG": str(patient_config_file(tmp_path))}
    env = {
        **patient,
        "FLOWLEDGER_CRASH_AT": point,
        "FLOWLEDGER_CRASH_SKIP": str(SEQUENTIAL),
        "FLOWLEDGER_CRASH_SIGNAL": str(signal_file),
    }
    proc = serve_process(db, port, env=env, log=tmp_path / "serve.log")
    writer = 0
    requests: list[tuple[str, dict[str, Any]]] = []
    answers: dict[int, httpx.Response] = {}
    try:
        wait_until_serving(url, proc)
        with httpx.Client(base_url=url, headers=auth(token), timeout=60) as client:
            for i in range(SEQUENTIAL):  # one commit each: the crash lands after these
                requests.append((f"/v1/operations/seq-{i}/dispatch", dispatch_body(f"exec-s{i}")))
                answers[i] = client.post(requests[-1][0], json=requests[-1][1])
                assert answers[i].json()["decision"] == "go"
        for i in range(BURST):
            if i % 3 == 0:
                n = i // 3
                requests.append((f"/v1/operations/seq-{n}/confirm", {"receipt": f"R-{n}"}))
            else:
                requests.append((f"/v1/operations/burst-{i}/dispatch", dispatch_body(f"exec-b{i}")))

        def send(i: int) -> None:
            try:
                with httpx.Client(
                    base_url=url, headers=auth(token), timeout=60, verify=CLIENT_TLS
                ) as client:
                    answers[i] = client.post(requests[i][0], json=requests[i][1])
            except httpx.TransportError:
                pass  # killed before it answered

        threads = [
            threading.Thread(target=send, args=(i,)) for i in range(SEQUENTIAL, len(requests))
        ]
        for t in threads:
            t.start()
        _wait_for(signal_file, proc)
        (writer,) = _children(proc.pid)  # the writer process, stopped at the crash point
        if killed == "receiver":
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            wait_until(lambda: _gone(writer), "the writer process ends with the receiver")
        else:
            os.kill(writer, signal.SIGKILL)
            assert proc.wait(timeout=60) == 2  # it stops serving, for its supervisor
        for t in threads:
            t.join()
    finally:
        stop(proc)
        if writer and not _gone(writer):  # never left holding the database for later tests
            os.kill(writer, signal.SIGKILL)
    if killed == "writer":
        said = (tmp_path / "serve.log").read_text()
        assert "stopped: the writer process ended (killed by SIGKILL)" in said
        # Every call the receiver took was answered before it stopped: none was left waiting
        # for the graceful stop's timeout (a call stranded by the writer's end would be).
        assert "timeout graceful shutdown exceeded" not in said
        # What the writer had not answered was answered 503: not a 2xx, so as unanswered.
        refused = [i for i, a in answers.items() if a.status_code != 200]
        assert refused, "the calls of the killed batch should have been answered 503"
        for i in refused:
            assert answers.pop(i).status_code == 503

    states = _states(db)
    for i, (path, body) in enumerate(requests):
        op = path.split("/")[3]
        answer = answers.get(i)
        if path.endswith("/dispatch"):
            if answer is not None:
                assert answer.json()["decision"] == "go"
                assert states[op][:2] == ("dispatching", 1) or states[op][0] == "confirmed"
            else:
                assert op not in states or states[op][0] == "dispatching"
        else:
            if answer is not None:
                assert states[op] == ("confirmed", 1, body["receipt"])
            assert states[op][0] in ("dispatching", "confirmed")
    unanswered = [i for i in range(len(requests)) if i not in answers]
    assert unanswered, "the crash should have left requests without an answer"
    if point == "batch_after_commit":
        assert any(requests[i][0].split("/")[3] in states for i in unanswered)

    # Restart without the crash point: every unanswered request, sent again, gets the answer
    # it would have had (the same execution's dispatch is a replay: go).
    proc = serve_process(db, port, env=patient, log=tmp_path / "serve.log")
    try:
        wait_until_serving(url, proc)
        with httpx.Client(base_url=url, headers=auth(token), timeout=60) as client:
            for i in unanswered:
                again = client.post(requests[i][0], json=requests[i][1])
                assert again.status_code == 200, again.text
                if requests[i][0].endswith("/dispatch"):
                    assert again.json()["decision"] == "go"
                else:
                    assert again.json()["state"] == "confirmed"
                    assert again.json()["reason"] is None  # no receipt conflict
    finally:
        stop(proc)
    store = open_store(db)
    try:
        with store.reader.connect() as conn:
            assert chain.verify(conn).ok
    finally:
        store.dispose()
