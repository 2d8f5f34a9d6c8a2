"""A database that stops answering, rather than refusing: each call is answered ``503`` with
``Retry-After`` within the write deadline, ``/readyz`` says not ready within the read
deadline, nothing answered is lost, and the receiver answers again once the database does,
without a restart.

On PostgreSQL the test's own server, on a port of its own, is frozen with SIGSTOP (and thawed
with SIGCONT in a ``finally``); its host's TCP stack still acknowledges every packet, as for a
stalled disk, so no libpq timeout fires and only the deadlines bound the calls. On SQLite the
writer process is held at a named fault point until the test releases it. The deadlines are 1 s;
the bound asserted is 30 s, for a loaded machine (before the deadlines, the calls waited for as
long as the database did: here, until the test lets it answer). Every call outside the outage
may pass a 1 s deadline on a loaded machine too, and is retried on 503 as a workflow following
``Retry-After`` would: only the outage's answers are asserted to be 503.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.deadline import Deadline
from flowledger.storage.engine import make_store, open_store, resolve_url
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import Operation, table
from tests.support.builders import dispatch_body
from tests.support.ledgers import new_ledger
from tests.support.receiver import auth, free_port, make_token, retried, serve_process, stop
from tests.support.receiver import wait_until_serving as wait_serving

DEADLINES = '[receiver]\nwrite_deadline = "1s"\nread_deadline = "1s"\n'
BOUND = 30.0  # seconds: an answer within the 1 s deadlines, on a loaded machine
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


def _dispatch(client: httpx.Client, op: str, key: str) -> tuple[httpx.Response, float]:
    return _timed(
        lambda: client.post(
            f"/v1/operations/{op}/dispatch",
            json=dispatch_body("exec-7"),
            headers={"Idempotency-Key": key},
        )
    )


def _assert_late(answer: httpx.Response, took: float) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"]
    assert took < BOUND, f"answered after {took:.1f} s"


def _retried(client: httpx.Client, op: str, key: str) -> httpx.Response:
    return retried(lambda: _dispatch(client, op, key)[0])


def _written(db: str, op: str) -> bool:
    store = open_store(db)
    try:
        ops = table(Operation)
        with store.reader.connect() as conn:
            found = conn.execute(ops.select().where(ops.c.operation_id == op)).first()
        return found is not None
    finally:
        store.dispose()


def _state(db: str, op: str) -> tuple[str, int]:
    store = open_store(db)
    try:
        ops = table(Operation)
        with store.reader.connect() as conn:
            row = conn.execute(ops.select().where(ops.c.operation_id == op)).one()
        return row.state, row.attempt
    finally:
        store.dispose()


def _serve(db: str, tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    config = tmp_path / "flowledger.toml"
    config.write_text(DEADLINES)
    port = free_port()
    proc = serve_process(
        db, port, env={"FLOWLEDGER_CONFIG": str(config), **env}, log=tmp_path / "serve.log"
    )
    url = f"http://127.0.0.1:{port}"
    wait_serving(url, proc)
    return proc, url


def _until(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # polling a condition, bounded


def test_a_stalled_sqlite_writer_is_503_within_the_deadline_and_the_retry_gets_its_go(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "ledger.db")
    store = new_ledger(db)
    token = make_token(Ledger(store), "stall")
    store.dispose()
    release = tmp_path / "release"
    os.mkfifo(release)
    signal_file = tmp_path / "blocked"
    env = {
        "FLOWLEDGER_CRASH_AT": "batch_before_commit",
        "FLOWLEDGER_CRASH_MODE": "block",
        "FLOWLEDGER_CRASH_RELEASE": str(release),
        "FLOWLEDGER_CRASH_SIGNAL": str(signal_file),
    }
    proc, url = _serve(db, tmp_path, env)
    try:
        with httpx.Client(base_url=url, headers=auth(token), timeout=BOUND) as client:
            late, took = _dispatch(client, "op-stalled", "key-1")
            _assert_late(late, took)
            assert took >= 0.9  # the deadline answered, not something before it
            _until("the writer held at its fault point", signal_file.exists)
            queued, took = _dispatch(client, "op-queued", "key-2")  # behind the held one
            _assert_late(queued, took)
            with open(release, "wb"):  # the writer's read of the pipe starts
                os.replace(_regular(tmp_path), release)  # later passes go straight on
            again = _retried(client, "op-stalled", "key-1")
            assert again.status_code == 200, again.text
            assert again.json()["decision"] == "go" and again.json()["attempt"] == 1
            # the first try was written once the writer went on; the retry gets its answer
            assert again.headers.get("idempotent-replayed") == "true"
            # A call taken after the queued one (the writer takes them in order): once it is
            # written, the writer has passed the queued call, which was past its deadline
            # before the writer began it: left out, so its retry is the first to write it.
            after = _retried(client, "op-after", "key-3")
            assert after.status_code == 200 and after.json()["decision"] == "go"
            assert not _written(db, "op-queued")
            queued_again = _retried(client, "op-queued", "key-2")
            assert queued_again.status_code == 200 and queued_again.json()["decision"] == "go"
    finally:
        stop(proc)
    assert _state(db, "op-stalled") == ("dispatching", 1)
    assert _state(db, "op-queued") == ("dispatching", 1)


def _regular(tmp_path: Path) -> Path:
    path = tmp_path / "released"
    path.write_bytes(b"")
    return path


@pytest.fixture(scope="module")
def frozen_server() -> Iterator[tuple[str, Callable[[int], None]]]:
    """A PostgreSQL server of this module's own, on a free port: its URL, and how to send a
    signal to the whole server (the postmaster first, then every process it started: each is
    a session of its own, so not of its process group)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL server binaries in {PG_BIN}")
    user = "postgres" if os.geteuid() == 0 else None  # initdb refuses root
    data = Path(tempfile.mkdtemp(prefix="flowledger-frozen-"))
    if user:
        shutil.chown(data, user, user)
    subprocess.run(
        [str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
        timeout=120,
        user=user,
        group=user,
    )
    port = free_port()
    settings = ["-c", "fsync=off", "-c", "listen_addresses=127.0.0.1", "-k", str(data)]
    server = subprocess.Popen(
        [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), *settings],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=user,
        group=user,
    )

    def signal_all(signum: int) -> None:
        os.kill(server.pid, signum)  # stopped first: it starts no process after this
        for pid in _children(server.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        _until("the test's PostgreSQL server", lambda: _accepts(url))
        yield url, signal_all
    finally:
        signal_all(signal.SIGCONT)
        server.send_signal(signal.SIGINT)  # fast shutdown: ends the sessions left open
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(data, ignore_errors=True)


def _children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                # pid (comm) state ppid …: comm may hold spaces, so from its last ")"
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent:
                    found.append(int(entry.name))
    return found


def _accepts(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.mark.postgres
def test_a_frozen_postgresql_is_503_within_the_deadlines_and_recovers_without_a_restart(
    frozen_server: tuple[str, Callable[[int], None]], tmp_path: Path
) -> None:
    db, signal_server = frozen_server
    store, _ = init_ledger(db)
    token = make_token(Ledger(store), "frozen")
    reader = auth(make_token(Ledger(store), "frozen-reads", "read"))
    store.dispose()
    proc, url = _serve(db, tmp_path, {})
    times: dict[str, float] = {}
    try:
        with httpx.Client(base_url=url, headers=auth(token), timeout=BOUND) as client:
            warm = _retried(client, "op-before", "key-0")  # a pooled connection, in use
            assert warm.status_code == 200 and warm.json()["decision"] == "go"
            assert retried(lambda: client.get("/readyz")).status_code == 200
            signal_server(signal.SIGSTOP)
            try:
                late, times["dispatch"] = _dispatch(client, "op-frozen", "key-1")
                ready, times["readyz"] = _timed(lambda: client.get("/readyz"))
                look = "/v1/operations/op-before"
                read, times["read"] = _timed(lambda: client.get(look, headers=reader))
                later, times["second dispatch"] = _dispatch(client, "op-frozen-2", "key-2")
            finally:
                signal_server(signal.SIGCONT)
                thawed = time.monotonic()
            _assert_late(late, times["dispatch"])
            _assert_late(ready, times["readyz"])
            assert ready.json()["error"]["code"] == "not_ready"
            _assert_late(read, times["read"])
            _assert_late(later, times["second dispatch"])

            _until("/readyz ready again", lambda: client.get("/readyz").status_code == 200)
            again = _retried(client, "op-frozen", "key-1")
            times["recovered"] = time.monotonic() - thawed
            assert again.status_code == 200, again.text
            assert again.json()["decision"] == "go" and again.json()["attempt"] == 1
            after = _retried(client, "op-after", "key-3")
            assert after.status_code == 200 and after.json()["decision"] == "go"
        assert proc.poll() is None  # the same process throughout: no restart
    finally:
        stop(proc)
    # The writer dropped the connection it waited on, rather than wait for the thaw.
    log = (tmp_path / "serve.log").read_text()
    assert "the database did not answer within 1 s; 1 connection(s) dropped" in log, log
    print("answer times (s):", {k: round(v, 2) for k, v in times.items()})
    assert _state(db, "op-frozen") == ("dispatching", 1)


@pytest.mark.postgres
def test_a_deadline_frees_a_call_stuck_on_a_frozen_postgresql_and_its_pool_recovers(
    frozen_server: tuple[str, Callable[[int], None]],
) -> None:
    db, signal_server = frozen_server
    store = make_store(resolve_url(db))
    deadline = Deadline(store.engine, 0.5)
    try:
        with store.engine.connect() as conn:
            conn.execute(sa.text("select 1"))
            signal_server(signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(sa.exc.OperationalError), deadline.bound():
                    conn.execute(sa.text("select 1"))  # its answer never comes
                took = time.monotonic() - started
            finally:
                signal_server(signal.SIGCONT)
        assert took < BOUND and deadline.cuts == 1, took
        # The pool's recovery is bounded by the deadline too, a generous one: a new connection
        # to a server just thawed may take more than 0.5 s on a loaded machine.
        deadline.seconds = BOUND
        with deadline.bound(), store.engine.connect() as conn:  # a new one, not the dropped
            assert conn.execute(sa.text("select 1")).scalar() == 1
        assert deadline.cuts == 1
    finally:
        store.dispose()
