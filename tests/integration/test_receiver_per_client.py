"""Per-client limits over real loopback sockets, on a ``flowledger serve`` of its own: one
client address that opens more slow connections than ``max_connections`` allows keeps only
``max_connections_per_client`` of them, the rest answered 429 and closed at once, while
another address's calls are answered; behind a trusted proxy, the same cap applies to the
requests in flight of each address its ``X-Forwarded-For`` names.

Clients come from other loopback addresses (all of 127.0.0.0/8 is this machine's on Linux);
127.0.0.1 is the trusted proxy (``trusted_proxies``' default). Every wait is for a condition,
bounded by ``BOUND``; no assertion is on how long anything took."""

from __future__ import annotations

import contextlib
import selectors
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from flowledger.services.ledger import Ledger
from tests.integration.test_receiver_bodies import BOUND, Answer, closed, head, read_answer
from tests.support.builders import dispatch_body
from tests.support.ledgers import new_ledger
from tests.support.receiver import (
    auth,
    free_port,
    make_token,
    serve_process,
    stop,
    wait_until_serving,
)

CAP = 10  # max_connections_per_client of the server under test
MAX = 40  # its max_connections
SLOW = 50  # slow sockets from one address: more than MAX, so that uncapped they starve all
ATTACKER, OTHER = "127.0.0.2", "127.0.0.3"


@dataclass
class Served:
    port: int
    token: str

    def connect(self, source: str) -> socket.socket:
        return socket.create_connection(
            ("127.0.0.1", self.port), timeout=BOUND, source_address=(source, 0)
        )

    def call(self, source: str, operation: str, **headers: str) -> httpx.Response:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=BOUND) as client:
            return client.post(
                f"http://127.0.0.1:{self.port}/v1/operations/{operation}/dispatch",
                json=dispatch_body(f"exec-{operation}"),
                headers={**auth(self.token), **headers},
            )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("per-client")
    db = str(tmp / "ledger.db")
    store = new_ledger(db)
    token = make_token(Ledger(store), "n8n")
    settings = tmp / "flowledger.toml"
    settings.write_text(
        f"[receiver]\nmax_connections = {MAX}\nmax_connections_per_client = {CAP}\n"
        'body_timeout = "5m"\n'
    )
    port = free_port()
    proc = serve_process(db, port, env={"FLOWLEDGER_CONFIG": str(settings)}, log=tmp / "log")
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc)
        yield Served(port, token)
    finally:
        stop(proc)
        store.dispose()


def refused(socks: list[socket.socket], count: int) -> list[Answer]:
    """Wait for ``count`` of ``socks`` to be answered, and read each answer and the close
    after it; the answered ones leave ``socks``."""
    answers: list[Answer] = []
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while len(answers) < count:
            ready = selector.select(BOUND)
            assert ready, f"{len(answers)} of {len(socks)} connections answered, not {count}"
            for key, _ in ready:
                assert isinstance(key.fileobj, socket.socket)
                sock = key.fileobj
                selector.unregister(sock)
                socks.remove(sock)
                answer = read_answer(sock)
                answer.closed = closed(sock)
                sock.close()
                answers.append(answer)
    return answers


@contextlib.contextmanager
def sockets() -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        yield held
    finally:
        for sock in held:
            sock.close()


def test_one_address_slow_sockets_past_its_cap_are_refused_while_another_is_answered(
    served: Served,
) -> None:
    with sockets() as slow:
        for _ in range(SLOW):  # a head that never ends
            sock = served.connect(ATTACKER)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: receiver\r\n")
            slow.append(sock)
        call = served.call(OTHER, "other-1")
        assert (call.status_code, call.json()["decision"]) == (200, "go")
        answers = refused(slow, SLOW - CAP)
        assert {(a.status, a.code, a.closed) for a in answers} == {
            (429, "too_many_connections", True)
        }
        assert answers[0].headers["retry-after"] == "1"
        for sock in slow:  # the CAP kept were held, not refused: their heads end, and are served
            sock.sendall(b"\r\n")
            assert read_answer(sock).status == 200
    assert served.call(ATTACKER, "attacker-1").status_code == 200  # its cap is free again
    metrics = httpx.get(f"http://127.0.0.1:{served.port}/metrics", timeout=BOUND).text
    assert f"flowledger_refused_connections_total {SLOW - CAP}.0" in metrics.splitlines()


def test_behind_a_trusted_proxy_the_forwarded_address_has_the_cap(served: Served) -> None:
    with sockets() as waiting:
        for i in range(CAP + 1):  # through the proxy (127.0.0.1), each waiting for its body
            sock = served.connect("127.0.0.1")
            sock.sendall(
                head(
                    f"/v1/operations/proxied-{i}/dispatch",
                    token=served.token,
                    length=100,
                    X_Forwarded_For="203.0.113.7",
                )
            )
            waiting.append(sock)
        (answer,) = refused(waiting, 1)
        assert (answer.status, answer.code, answer.closed) == (429, "too_many_connections", True)
        other = served.call("127.0.0.1", "proxied-other", **{"X-Forwarded-For": "203.0.113.8"})
        assert (other.status_code, other.json()["decision"]) == (200, "go")
