"""Slow, oversized and unauthenticated requests over real loopback sockets: the token is
checked on the headers before the body is read, a body that does not arrive in time is
answered 408, and every such answer closes the connection. (The head's size and time are the
reverse proxy's to bound: docs/production.md.) Each test speaks raw
HTTP/1.1 so that it can stop sending halfway; every wait is bounded by the socket timeout,
and the assertions are on the answers, never on how long they took."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa

from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Operation, table
from tests.support.builders import dispatch_body
from tests.support.ledgers import new_ledger
from tests.support.receiver import (
    SECRET,
    auth,
    free_port,
    make_signing_token,
    make_token,
    receiver_config,
    serve_process,
    server_thread,
    stop,
    wait_until_serving,
)

BOUND = 30.0  # seconds a socket read may wait: a bound for a loaded machine, never a pause
TIMEOUT = 0.2  # the body timeout of the servers under test
PATIENT = 10.0  # the same, where a test opens many connections at once
DISPATCH = "/v1/operations/op-1/dispatch"
BODY = b'{"processing_version":"v1","execution_id":"e-1","input":{"n":1}}'


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool = False  # the server closed the connection after answering (``converse``)

    @property
    def code(self) -> str:
        import json

        return str(json.loads(self.body)["error"]["code"])


def head(
    path: str = DISPATCH, *, token: str | None, length: int, method: str = "POST", **extra: str
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: receiver", "Content-Type: application/json"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in extra.items()]
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def open_socket(url: str) -> socket.socket:
    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=BOUND)
    return sock


def read_answer(sock: socket.socket) -> Answer:
    """One answer from ``sock`` (bounded by its timeout), past any interim one (``100
    Continue``)."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, f"the connection closed without an answer: {buf!r}"
            buf += chunk
        raw_head, _, body = buf.partition(b"\r\n\r\n")
        status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
        if not status_line.split()[1].startswith("1"):
            break
        buf = body
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-answer"
        body += chunk
    return Answer(int(status_line.split()[1]), headers, body)


def closed(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (bounded by its timeout) with nothing more sent."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def converse(url: str, data: bytes) -> Answer:
    """Send ``data`` (perhaps a request cut short), read the answer, and see the server close
    the connection."""
    with open_socket(url) as sock:
        sock.sendall(data)
        answer = read_answer(sock)
        answer.closed = closed(sock)
        return answer


def operations(store: Store) -> int:
    with store.reader.connect() as conn:
        count = sa.select(sa.func.count()).select_from(table(Operation))
        return int(conn.execute(count).scalar_one())


@dataclass
class Served:
    url: str
    store: Store
    token: str
    signing_token: str


@contextlib.contextmanager
def serving(tmp_path: Path, timeout: float) -> Iterator[Served]:
    store = new_ledger(tmp_path / "ledger.db")
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    signing, _ = make_signing_token(ledger, "n8n-signed")
    config = receiver_config(body_timeout=timeout)
    app = create_app(ledger, config=config, secret=SECRET, token_ttl=0.0)
    try:
        with server_thread(app) as url:
            yield Served(url, store, token, signing)
    finally:
        store.dispose()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path, TIMEOUT) as served:
        yield served


@pytest.fixture
def served_patiently(tmp_path: Path) -> Iterator[Served]:
    """A server whose head and body timeouts a loaded machine cannot reach while it takes many
    connections at once: what it answers then is its decision, not a timeout."""
    with serving(tmp_path, PATIENT) as served:
        yield served


def test_whole_bodies_are_served_on_one_kept_alive_connection(served: Served) -> None:
    with open_socket(served.url) as sock:
        answers = []
        for n in (1, 2):
            body = BODY.replace(b"e-1", f"e-{n}".encode())
            sock.sendall(
                head(f"/v1/operations/op-{n}/dispatch", token=served.token, length=len(body)) + body
            )
            answers.append(read_answer(sock))
    assert [a.status for a in answers] == [200, 200], [a.body for a in answers]
    assert all("connection" not in a.headers for a in answers)


def test_a_body_that_stops_arriving_is_answered_408_and_the_connection_closed(
    served: Served,
) -> None:
    # 100,000 bytes declared, 5 sent, then nothing: the receiver does not wait for the rest.
    answer = converse(served.url, head(token=served.token, length=100_000) + BODY[:5])
    assert (answer.status, answer.code) == (408, "body_timeout")
    assert answer.headers["connection"] == "close"
    assert answer.closed
    assert operations(served.store) == 0


SHORT = 262_000  # declared; only the first 1,000 bytes are ever sent


@pytest.mark.parametrize(
    ("who", "code"),
    [
        (None, "missing_token"),
        ("flt_not-a-token", "unknown_token"),
        ("signing", "signature_required"),  # a signing token without the signature header
    ],
)
def test_an_unauthenticated_body_is_refused_before_it_is_read(
    served: Served, who: str | None, code: str
) -> None:
    token = served.signing_token if who == "signing" else who
    # The answer comes while 261,000 declared bytes are still unsent: nothing waited for them.
    answer = converse(served.url, head(token=token, length=SHORT) + b"x" * 1000)
    assert (answer.status, answer.code) == (401, code)
    assert answer.headers["connection"] == "close"
    assert answer.closed
    assert operations(served.store) == 0


def test_many_unauthenticated_bodies_at_once_are_all_refused_unread(
    served_patiently: Served,
) -> None:
    served = served_patiently
    socks = [open_socket(served.url) for _ in range(50)]
    try:
        for sock in socks:  # every connection holds an unfinished body before any is read
            sock.sendall(head(token="flt_wrong", length=SHORT) + b"x" * 1000)
        answers = [read_answer(sock) for sock in socks]
        shut = [closed(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert {(a.status, a.code) for a in answers} == {(401, "unknown_token")}
    assert all(shut)


def test_a_read_route_refuses_an_unauthenticated_body_unread(served: Served) -> None:
    request = head("/v1/operations", token=None, length=SHORT, method="GET") + b"x" * 1000
    answer = converse(served.url, request)
    assert (answer.status, answer.code, answer.closed) == (401, "missing_token", True)


@pytest.mark.parametrize("token", [None, "n8n"], ids=["no-token", "token"])
def test_an_id_with_a_line_break_is_refused_and_its_unread_body_closes_the_connection(
    served: Served, token: str | None
) -> None:
    sent = head("/v1/operations/a%0Ab/dispatch", token=token and served.token, length=100)
    answer = converse(served.url, sent + b"{")
    assert (answer.status, answer.code, answer.closed) == (422, "invalid_id", True)
    assert answer.headers["connection"] == "close"  # at once: the rest is never read
    assert operations(served.store) == 0


def test_a_declared_body_over_the_limit_is_refused_at_once(served: Served) -> None:
    answer = converse(served.url, head(token=served.token, length=10_000_000) + b"{")
    assert (answer.status, answer.code, answer.closed) == (413, "body_too_large", True)


def test_serve_takes_its_body_timeout_from_the_configuration(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    store = new_ledger(db)
    token = make_token(Ledger(store), "n8n")
    settings = tmp_path / "flowledger.toml"
    settings.write_text('[receiver]\nbody_timeout = "200ms"\nmax_connections = 64\n')
    port = free_port()
    env: dict[str, Any] = {"FLOWLEDGER_CONFIG": str(settings)}
    proc = serve_process(db, port, env=env, log=tmp_path / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, proc)
        answer = converse(url, head(token=token, length=100_000) + b"{")
        assert (answer.status, answer.code, answer.closed) == (408, "body_timeout", True)
    finally:
        stop(proc)
        store.dispose()


def test_a_read_by_a_signing_token_with_a_slow_body_is_answered_408(served: Served) -> None:
    # A signing token's signature covers the body, so a read route reads it: under the same
    # deadline as the write calls.
    stamp = int(time.time())
    request = head(
        "/v1/token",  # any valid token may read it
        token=served.signing_token,
        length=100,
        method="GET",
        X_Flowledger_Signature=f"t={stamp},v2={'0' * 64}",
    )
    answer = converse(served.url, request + b"{")
    assert (answer.status, answer.code, answer.closed) == (408, "body_timeout", True)


def peak_memory(pid: int) -> int:
    """The most memory process ``pid`` has held at once (its peak resident set), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc")


SENT = 200_000  # of each 262,000-byte body, at once: 300 of them are 60 MB
HELD = 16 * 1024 * 1024  # what the server may hold for all of them together, at its peak


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_unauthenticated_bodies_never_take_memory_of_their_size(tmp_path: Path) -> None:
    """``flowledger serve`` as its own process: 300 connections each send a bad token and
    200,000 bytes of a 262,000-byte body before any answer is read. Every one is refused,
    and the server's peak memory grows by less than a quarter of what was sent: no body was
    read into it (a server that read bodies first would hold all 300 until their timeout)."""
    db = str(tmp_path / "ledger.db")
    store = new_ledger(db)
    token = make_token(Ledger(store), "n8n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve_process(db, port)
    socks: list[socket.socket] = []

    def send(_: int) -> None:
        sock = open_socket(url)
        socks.append(sock)
        with contextlib.suppress(OSError):  # refused and closed before all of it was sent
            sock.sendall(head(token="flt_wrong", length=SHORT) + b"x" * SENT)

    try:
        wait_until_serving(url, proc)
        before = peak_memory(proc.pid)
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(send, range(300)))
        refused = {read_answer(sock).code for sock in socks}
        grown = peak_memory(proc.pid) - before
        for sock in socks:
            sock.close()
        served = httpx.post(
            f"{url}{DISPATCH}", json=dispatch_body(), headers=auth(token), timeout=BOUND
        )
    finally:
        for sock in socks:
            sock.close()
        stop(proc)
    try:
        assert grown < HELD, f"peak memory grew by {grown:,} bytes"
        assert refused == {"unknown_token"}
        assert served.status_code == 200 and operations(store) == 1
    finally:
        store.dispose()


@pytest.mark.parametrize(
    "sent",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        head(token=None, length=5).replace(
            b"Content-Length: 5", b"Content-Length: 5\r\nContent-Length: 6"
        )
        + b"{}{}{}",
        head(token=None, length=5).replace(b"Content-Length: 5", b"Transfer-Encoding: chunked")
        + b"zz\r\n{}\r\n0\r\n\r\n",
    ],
    ids=["request-line", "two-lengths", "bad-chunk-size"],
)
def test_a_request_the_parser_refuses_is_answered_400_and_closed(
    served: Served, sent: bytes
) -> None:
    answer = converse(served.url, sent)  # in uvicorn's words: a plain-text 400
    assert (answer.status, answer.closed) == (400, True)
    assert operations(served.store) == 0
