"""The workflow calls served from the HTTP parser's callbacks (``engine/exchange.py``) over real
loopback sockets: the same answers, byte for byte but the date, as the same requests get the
ASGI way (uvicorn's own protocol, which never takes that path); answers in order on a
pipelined connection; the latency metric; and a graceful stop that waits for a call in
flight. Every wait is bounded by the socket timeout or an event, never a pause."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowledger.config import ReceiverConfig
from flowledger.receiver import create_app
from flowledger.receiver.api.tokens import TokenCache
from flowledger.receiver.engine import exchange
from flowledger.receiver.engine.reply import Reply
from flowledger.receiver.engine.server import bounded_head_protocol
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger
from tests.integration.test_receiver_bodies import (
    Answer,
    closed,
    head,
    open_socket,
    read_answer,
)
from tests.support.receiver import (
    SECRET,
    make_signing_token,
    make_token,
    server_thread,
    signature,
    uvicorn_thread,
)

TIMEOUT = 10.0  # the head and body timeout: never reached by these tests

BODY = b'{"processing_version":"v1","execution_id":"e-1","input":{"n":1}}'


@contextlib.contextmanager
def receiver(tmp_path: Path, *, direct: bool, writer_process: bool) -> Iterator[dict[str, Any]]:
    """A receiver on a loopback port: with ``direct``, the protocol that serves the workflow
    calls from its callbacks; without, uvicorn's own httptools protocol (the ASGI way)."""
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store)
    tokens = {
        "write": make_token(ledger, "n8n"),
        "read": make_token(ledger, "reader", "read"),
    }
    signing, key = make_signing_token(ledger, "n8n-signed")
    config = ReceiverConfig(body_timeout=TIMEOUT)
    app = create_app(ledger, config=config, secret=SECRET, writer_process=writer_process)
    http: Any = bounded_head_protocol(TIMEOUT) if direct else "httptools"
    try:
        with server_thread(app, http=http) as url:
            yield {"url": url, "tokens": tokens, "signing": (signing, key), "app": app}
    finally:
        store.dispose()


def exchange_once(url: str, request: bytes) -> Answer:
    with open_socket(url) as sock:
        sock.sendall(request)
        answer = read_answer(sock)
        answer.closed = "connection" in answer.headers and closed(sock)
    return answer


def requests(served: dict[str, Any], stamp: int) -> list[tuple[str, bytes, bool]]:
    """A workflow's calls, their mistakes and some hostile requests, each on its own
    connection, in this order; and whether the protocol serves each from its callbacks (the
    rest it hands to ASGI: nothing of theirs is unusual to the lane, or all is). Signed at
    ``stamp``: both servers see the same requests."""
    write, read = served["tokens"]["write"], served["tokens"]["read"]
    signing, key = served["signing"]

    def post(path: str, body: bytes, token: str | None = write, **extra: str) -> bytes:
        return head(path, token=token, length=len(body), **extra) + body

    def signed(path: str, body: bytes, *, late: int = 0) -> bytes:
        sign = signature(key, path, body, stamp - late)
        return post(path, body, signing, X_Flowledger_Signature=sign)

    def raw(line: str, *headers: str, body: bytes = BODY) -> bytes:
        lines = [line, "Host: receiver", f"Authorization: Bearer {write}", *headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    op = "/v1/operations/op-1"
    confirm = b'{"receipt":"R-1","execution_id":"e-1"}'
    keyed = b'{"processing_version":"v1","input":{"n":2}}'
    json_type = "Content-Type: application/json"
    length = f"Content-Length: {len(BODY)}"
    chunked = f"{len(BODY):x}\r\n".encode() + BODY + b"\r\n0\r\n\r\n"
    return [
        ("go", post(f"{op}/dispatch", BODY), True),
        ("the same execution again", post(f"{op}/dispatch", BODY), True),
        ("confirm", post(f"{op}/confirm", confirm), True),
        ("skip", post(f"{op}/dispatch", BODY), True),
        ("another input", post(f"{op}/dispatch", BODY.replace(b'"n":1', b'"n":9')), True),
        ("fail, unknown", post("/v1/operations/op-3/fail", b'{"outcome":"unknown"}'), True),
        ("a query string", post("/v1/operations/op-4/dispatch?x=1", BODY), True),
        ("an id with escapes", post("/v1/operations/inv%3A42/dispatch", BODY), True),
        ("an id not UTF-8", post("/v1/operations/a%ffb/dispatch", BODY), True),
        ("a missing value as id", post("/v1/operations/undefined/dispatch", BODY), True),
        ("not JSON", post(f"{op}/dispatch", b"{nope"), True),
        ("an unknown field", post(f"{op}/dispatch", b'{"processing_version":"v1","x":1}'), True),
        ("a wrong type", post(f"{op}/dispatch", b'{"processing_version":5}'), True),
        ("not JSON's type", post(f"{op}/dispatch", BODY).replace(b"json", b"xml", 1), True),
        ("no token", post(f"{op}/dispatch", BODY, None), True),
        ("an unknown token", post(f"{op}/dispatch", BODY, "flt_nope"), True),
        ("a read token", post(f"{op}/dispatch", BODY, read), True),
        ("keyed", post("/v1/operations/op-2/prepare", keyed, Idempotency_Key="k-1"), True),
        ("keyed again", post("/v1/operations/op-2/prepare", keyed, Idempotency_Key="k-1"), True),
        (
            "the key, another body",
            post("/v1/operations/op-5/prepare", keyed, Idempotency_Key="k-1"),
            True,
        ),
        ("a bad key", post("/v1/operations/op-2/prepare", keyed, Idempotency_Key="a b"), True),
        ("signed", signed("/v1/operations/op-6/dispatch", BODY), True),
        ("signed, again", signed("/v1/operations/op-6/dispatch", BODY), True),
        ("signed, stale", signed("/v1/operations/op-7/dispatch", BODY, late=86400), True),
        (
            "signed, tampered",
            signed("/v1/operations/op-8/dispatch", BODY).replace(b'"n":1', b'"n":2'),
            True,
        ),
        ("n8n's error hook", post("/v1/hooks/n8n/error", b'{"execution":{"id":"e-1"}}'), True),
        ("a slash after", post(f"{op}/dispatch/", BODY), False),
        ("a read of a call's path", raw(f"GET {op}/dispatch HTTP/1.1", body=b""), False),
        ("HTTP/1.0", raw("POST /v1/operations/op-10/dispatch HTTP/1.0", json_type, length), False),
        (
            "an absolute target",
            raw("POST http://receiver/v1/operations/op-11/dispatch HTTP/1.1", json_type, length),
            True,
        ),
        ("a fragment", raw(f"POST {op}/dispatch#x HTTP/1.1", json_type, length), True),
        (
            "a chunked body",
            raw(
                f"POST {op}/dispatch HTTP/1.1",
                json_type,
                "Transfer-Encoding: chunked",
                body=chunked,
            ),
            False,
        ),
        (
            "Expect: 100-continue",
            raw(f"POST {op}/dispatch HTTP/1.1", json_type, length, "Expect: 100-continue"),
            False,
        ),
        (
            "no body",
            raw(f"POST {op}/dispatch HTTP/1.1", json_type, "Content-Length: 0", body=b""),
            False,
        ),
        (
            "a declared body over the limit",
            raw(f"POST {op}/dispatch HTTP/1.1", json_type, "Content-Length: 999999999", body=b"{"),
            False,
        ),
        ("an escaped line break", post("/v1/operations/a%0Ab/dispatch", BODY), False),
        (
            "a proxy's client",
            raw(f"POST {op}/dispatch HTTP/1.1", json_type, length, "X-Forwarded-For: 10.1.2.3"),
            False,
        ),
    ]


def answers(served: dict[str, Any], stamp: int) -> list[tuple[str, int, dict[str, str], Any, bool]]:
    said = []
    for name, request, _ in requests(served, stamp):
        answer = exchange_once(served["url"], request)
        headers = {k: v for k, v in answer.headers.items() if k != "date"}
        body = json.loads(answer.body) if answer.body else None
        said.append((name, answer.status, headers, body, answer.closed))
    return said


@pytest.mark.parametrize("writer_process", [False, True], ids=["thread", "writer-process"])
def test_the_calls_get_the_same_answers_as_the_asgi_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_process: bool
) -> None:
    served_so: list[int] = []
    original = exchange.Exchange.answer

    def counted(self: exchange.Exchange, reply: Reply) -> None:
        served_so.append(reply.status)
        original(self, reply)

    monkeypatch.setattr(exchange.Exchange, "answer", counted)
    stamp = int(time.time())
    with receiver(tmp_path / "direct", direct=True, writer_process=writer_process) as served:
        direct = answers(served, stamp)
    taken = len(served_so)
    with receiver(tmp_path / "asgi", direct=False, writer_process=writer_process) as served:
        asgi = answers(served, stamp)
    assert len(served_so) == taken  # uvicorn's own protocol never takes the direct path
    assert direct == asgi
    with receiver(tmp_path / "count", direct=False, writer_process=False) as served:
        expected = sum(1 for *_, so in requests(served, stamp) if so)
    assert taken == expected
    by_name = {name: (status, body) for name, status, _, body, _ in direct}
    assert by_name["go"][1]["decision"] == "go"
    assert by_name["skip"][1]["decision"] == "skip"
    assert by_name["keyed again"][0] == 200
    assert by_name["signed, again"][1]["error"]["code"] == "replayed_signature"
    assert {name for name, *_, shut in direct if shut} >= {"no token", "an unknown token"}


def test_pipelined_calls_are_answered_in_order(tmp_path: Path) -> None:
    with receiver(tmp_path, direct=True, writer_process=False) as served:
        token = served["tokens"]["write"]
        calls = []
        for n in range(1, 5):
            body = BODY.replace(b"e-1", f"e-{n}".encode())
            path = f"/v1/operations/op-{n}/dispatch"
            calls.append(head(path, token=token, length=len(body)) + body)
        with open_socket(served["url"]) as sock:
            sock.sendall(b"".join(calls))  # four requests before any answer
            got = [read_answer(sock) for _ in calls]
    assert [a.status for a in got] == [200] * 4
    assert [json.loads(a.body)["operation_id"] for a in got] == [f"op-{n}" for n in range(1, 5)]


def test_a_call_served_so_is_timed_under_its_route(tmp_path: Path) -> None:
    def timed(url: str) -> float:
        """The dispatches answered 200 so far (the registry is the process's)."""
        text = httpx.get(f"{url}/metrics", timeout=30).text
        for line in text.splitlines():
            if (
                line.startswith("flowledger_http_request_duration_seconds_count")
                and 'route="/v1/operations/{operation_id:path}/dispatch"' in line
                and 'method="POST"' in line
                and 'status="200"' in line
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    with receiver(tmp_path, direct=True, writer_process=False) as served:
        url, token = served["url"], served["tokens"]["write"]
        before = timed(url)
        for n in range(3):
            request = head(f"/v1/operations/timed-{n}/dispatch", token=token, length=len(BODY))
            assert exchange_once(url, request + BODY).status == 200
        assert timed(url) == before + 3


def test_a_graceful_stop_answers_the_call_in_flight_and_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop begins while a call waits for its write; the call is still answered, with
    ``connection: close``, before the server ends."""
    in_flight, stopping = threading.Event(), threading.Event()
    released: concurrent.futures.Future[None] = concurrent.futures.Future()
    start = exchange.WriteLane.start

    def held_back(self: Any, *args: Any) -> Any:
        outcome = start(self, *args)

        async def after_release() -> Reply:
            reply = outcome if isinstance(outcome, Reply) else await outcome
            await asyncio.wrap_future(released)  # the test's word
            return reply

        in_flight.set()
        return after_release()

    monkeypatch.setattr(exchange.WriteLane, "start", held_back)
    protocol = bounded_head_protocol(TIMEOUT)
    shutdown = protocol.shutdown  # type: ignore[attr-defined]

    def told_to_stop(self: Any) -> None:
        shutdown(self)
        stopping.set()

    monkeypatch.setattr(protocol, "shutdown", told_to_stop)
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    app = create_app(ledger, config=ReceiverConfig(body_timeout=TIMEOUT), secret=SECRET)
    try:
        with uvicorn_thread(app, http=protocol) as running:
            with open_socket(running.url) as sock:
                sock.sendall(head(token=token, length=len(BODY)) + BODY)
                assert in_flight.wait(30)
                running.server.should_exit = True  # the stop begins with the call in flight
                assert stopping.wait(30)
                released.set_result(None)
                answer = read_answer(sock)
                shut = closed(sock)
            running.thread.join(timeout=30)
            assert not running.thread.is_alive()
    finally:
        if not released.done():
            released.set_result(None)
        store.dispose()
    assert answer.status == 200 and json.loads(answer.body)["decision"] == "go"
    assert answer.headers["connection"] == "close"
    assert shut


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "asgi"])
def test_a_call_served_so_logs_the_access_line_uvicorn_logs(tmp_path: Path, direct: bool) -> None:
    """Each answer's access line: the client, method, path with its query, version and
    status, as uvicorn's cycle logs it."""
    lines = _Lines()
    access = logging.getLogger("uvicorn.access")
    access.addHandler(lines)
    level = access.level
    access.setLevel(logging.INFO)
    try:
        store, _ = init_ledger(str(tmp_path / "ledger.db"))
        ledger = Ledger(store)
        token = make_token(ledger, "n8n")
        app = create_app(ledger, config=ReceiverConfig(body_timeout=TIMEOUT), secret=SECRET)
        http: Any = bounded_head_protocol(TIMEOUT) if direct else "httptools"
        try:
            settings = {"log_config": None, "log_level": "info", "access_log": True}
            with server_thread(app, http=http, **settings) as url:
                sent = [
                    head("/v1/operations/logged/dispatch?x=1", token=token, length=len(BODY))
                    + BODY,
                    head("/v1/operations/logged/dispatch", token="flt_nope", length=len(BODY))
                    + BODY,
                ]
                for request in sent:
                    exchange_once(url, request)
        finally:
            store.dispose()
    finally:
        access.removeHandler(lines)
        access.setLevel(level)
    said = [record.args for record in lines.records]
    assert [args[1:] for args in said] == [  # type: ignore[index]
        ("POST", "/v1/operations/logged/dispatch?x=1", "1.1", 200),
        ("POST", "/v1/operations/logged/dispatch", "1.1", 401),
    ]
    assert all(str(args[0]).startswith("127.0.0.1:") for args in said)  # type: ignore[index]


@contextlib.contextmanager
def slow_tokens(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every reload of the token cache waits for the event the block is given (set at its
    end, whatever happened)."""
    release = threading.Event()
    reload = TokenCache.reload

    def waiting(self: TokenCache) -> None:
        assert release.wait(30)
        reload(self)

    monkeypatch.setattr(TokenCache, "reload", waiting)
    try:
        yield release
    finally:
        release.set()


def signalled(monkeypatch: pytest.MonkeyPatch, name: str) -> threading.Event:
    """An event set once ``Exchange.<name>`` has run."""
    done = threading.Event()
    original = getattr(exchange.Exchange, name)

    def then_signal(self: exchange.Exchange, *args: Any) -> Any:
        try:
            return original(self, *args)
        finally:
            done.set()

    monkeypatch.setattr(exchange.Exchange, name, then_signal)
    return done


@contextlib.contextmanager
def stale_cache_receiver(tmp_path: Path, **settings: Any) -> Iterator[dict[str, Any]]:
    """A receiver whose token cache is always to be read again (``token_ttl`` 0): every
    call waits for the reload before its token is known."""
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    config = ReceiverConfig(body_timeout=settings.pop("body_timeout", TIMEOUT))
    app = create_app(ledger, config=config, secret=SECRET, token_ttl=0.0)
    http = bounded_head_protocol(config.body_timeout.total_seconds())
    try:
        with server_thread(app, http=http, **settings) as url:
            yield {"url": url, "token": token, "store": store}
    finally:
        store.dispose()


def stored(store: Any) -> int:
    from tests.integration.test_receiver_bodies import operations

    return operations(store)


@pytest.mark.parametrize("token", ["known", "unknown"])
def test_a_client_gone_while_its_token_is_looked_up_has_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, token: str
) -> None:
    """The whole request arrives, the client leaves, then the token is known: under ASGI the
    lane reads a disconnect and writes nothing; so here, and a refused token's error is
    not left unread (asyncio would log it)."""
    lost = signalled(monkeypatch, "lost")
    admitted = signalled(monkeypatch, "_admitted")
    with slow_tokens(monkeypatch) as release, stale_cache_receiver(tmp_path) as served:
        bearer = served["token"] if token == "known" else "flt_nope"
        request = head("/v1/operations/gone/dispatch", token=bearer, length=len(BODY)) + BODY
        with open_socket(served["url"]) as sock:
            sock.sendall(request)
        assert lost.wait(30)  # the server saw the client go, with the token still unknown
        release.set()
        assert admitted.wait(30)
        assert stored(served["store"]) == 0
        release_check = exchange_once(
            served["url"], head("/v1/operations/after/dispatch", token=served["token"],
                                length=len(BODY)) + BODY
        )  # fmt: skip
    assert release_check.status == 200
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_the_body_deadline_counts_from_the_tokens_admission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token looked up for longer than the body timeout does not use up the body's time:
    the body guard's clock starts at the first read, after the token is known."""
    timeout = 0.2
    swept: list[float] = []
    past = threading.Event()
    late = exchange.Exchange.late

    def watched(self: exchange.Exchange, now: float) -> None:
        swept.append(now)
        if now - swept[0] > 2 * timeout:  # a head-counted deadline would be long gone
            past.set()
        late(self, now)

    monkeypatch.setattr(exchange.Exchange, "late", watched)
    with (
        slow_tokens(monkeypatch) as release,
        stale_cache_receiver(tmp_path, body_timeout=timeout) as served,
    ):
        request = head("/v1/operations/slow/dispatch", token=served["token"], length=len(BODY))
        with open_socket(served["url"]) as sock:
            sock.sendall(request + BODY[:10])
            assert past.wait(30)
            release.set()
            sock.sendall(BODY[10:])
            answer = read_answer(sock)
    assert answer.status == 200, answer.body


def test_a_call_after_a_refusal_in_the_same_read_keeps_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal answered from the parser's callbacks, then a call in the same read whose
    write takes long: no keep-alive timer may run while that call is owed its answer."""
    in_flight = threading.Event()
    released: concurrent.futures.Future[None] = concurrent.futures.Future()
    start = exchange.WriteLane.start

    def held_back(self: Any, call: Any, params: Any, *args: Any) -> Any:
        outcome = start(self, call, params, *args)
        if params.get("operation_id") != "held" or isinstance(outcome, Reply):
            return outcome

        async def after_release() -> Reply:
            reply = await outcome
            await asyncio.wrap_future(released)
            return reply

        in_flight.set()
        return after_release()

    monkeypatch.setattr(exchange.WriteLane, "start", held_back)
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store)
    token = make_token(ledger, "n8n")
    app = create_app(ledger, config=ReceiverConfig(body_timeout=TIMEOUT), secret=SECRET)
    try:
        with uvicorn_thread(app, timeout_keep_alive=1) as running:
            refused = head("/v1/operations/x/dispatch", token=token, length=len(BODY)) + BODY
            refused = refused.replace(b"application/json", b"text/plain")  # 415 at once
            held = head("/v1/operations/held/dispatch", token=token, length=len(BODY)) + BODY
            warm = head("/v1/operations/warm/dispatch", token=token, length=len(BODY)) + BODY
            # The token known (the cache read a moment ago): the refusal is answered from the
            # parser's callbacks, within the read that also holds the next call.
            assert exchange_once(running.url, warm).status == 200
            with open_socket(running.url) as sock:
                sock.sendall(refused + held)  # one read: the refusal, then the held call
                first = read_answer(sock)
                assert in_flight.wait(30)
                (connection,) = running.server.server_state.connections
                armed = connection.timeout_keep_alive_task
                direct = type(connection.cycle) is exchange.Exchange
                released.set_result(None)
                second = read_answer(sock)
    finally:
        if not released.done():
            released.set_result(None)
        store.dispose()
    assert first.status == 415
    assert direct  # the held call is the parser's, not a pipelined ASGI request
    assert armed is None  # nothing would close the connection under the held call
    assert second.status == 200 and json.loads(second.body)["decision"] == "go"
