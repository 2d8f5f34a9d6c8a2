"""The receiver under test: tokens and signatures, an in-process client over ASGI (``Api``,
``running``), and servers on real sockets (uvicorn in a thread, or ``flowledger serve`` in a
subprocess)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import uvicorn
from fastapi import FastAPI

from flowledger.config import ReceiverConfig
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger

SECRET = b"test-server-secret"
STARTUP_TIMEOUT = 90.0  # a bound for a loaded machine, not a wait: the poll returns at once
BODY_LIMIT = 4096  # the body limit of the ``api`` fixture's receiver
# The TLS context of the clients a test makes by the dozen (one a thread), made once: httpx
# makes one for every client it builds unless given one, some 20 ms of CPU each (a CA
# bundle loaded), taken from the servers under test. Plain http never uses it.
CLIENT_TLS = ssl.create_default_context()


PATIENT = timedelta(minutes=2)  # database deadlines no loaded test machine reaches
# The same, for a ``flowledger serve`` child (its FLOWLEDGER_CONFIG): see patient_config_file.
PATIENT_TOML = '[receiver]\nwrite_deadline = "2m"\nread_deadline = "2m"\n'


def receiver_config(**settings: Any) -> ReceiverConfig:
    """The receiver's default settings but for its database deadlines, which no loaded test
    machine reaches: a slow read or write is no 503 in a test that is not about deadlines
    (the defaults, 2 s and 5 s, may pass on a loaded machine). A test of the deadlines sets
    its own."""
    return ReceiverConfig(**{"read_deadline": PATIENT, "write_deadline": PATIENT, **settings})


def api_config(**settings: Any) -> ReceiverConfig:
    """The shared fixtures' receiver settings: :func:`receiver_config` with the small body
    limit."""
    return receiver_config(**{"body_limit": BODY_LIMIT, **settings})


def patient_config_file(directory: Path) -> Path:
    """A ``flowledger.toml`` in ``directory`` with the deadlines of :func:`receiver_config`,
    for a ``flowledger serve`` child (``FLOWLEDGER_CONFIG``) in a test not about them."""
    path = directory / "flowledger.toml"
    path.write_text(PATIENT_TOML)
    return path


def retried(call: Callable[[], Any], *, within: float = 60.0) -> Any:
    """``call``'s first answer that is not a 503 for a passed deadline, as a client following
    ``Retry-After`` gets it (without its wait); the last such 503 once ``within`` seconds have
    passed. For the normal calls of a test that sets short database deadlines: on a loaded
    machine one may pass its deadline, and a workflow retries it (the same idempotency key
    gets the same answer). Any other 503 (a failed request, the writer gone) is returned at
    once, for the test to fail on."""
    until = time.monotonic() + within
    answer = call()
    while _late(answer) and time.monotonic() < until:
        time.sleep(0.1)  # pacing the retries, not synchronising anything
        answer = call()
    return answer


def _late(answer: Any) -> bool:
    """A 503 because the database did not answer within a deadline (the write's, a read's,
    the token reload's or readiness's)."""
    return answer.status_code == 503 and "did not answer" in answer.text


def make_token(ledger: Ledger, name: str, scope: str = "write", *, signing: bool = False) -> str:
    return create_token(ledger, name, scope, signing=signing, server_secret=SECRET).token


def make_signing_token(ledger: Ledger, name: str) -> tuple[str, bytes]:
    made = create_token(ledger, name, "write", signing=True, server_secret=SECRET)
    assert made.signing_secret is not None
    return made.token, bytes.fromhex(made.signing_secret)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def signature(
    key: bytes, path: str, body: bytes, stamp: int | None = None, *, method: str = "POST"
) -> str:
    """``X-Flowledger-Signature`` v2: HMAC-SHA256 of "t.METHOD.PATH.body", PATH as sent (with
    its query)."""
    stamp = int(time.time()) if stamp is None else stamp
    signed = f"{stamp}.{method}.{path}.".encode() + body
    return f"t={stamp},v2={hmac.new(key, signed, hashlib.sha256).hexdigest()}"


@dataclass
class Api:
    """A receiver app in its own event loop (its lifespan running the writer), called from
    plain test functions; ``tokens`` maps a scope name to a token of that scope."""

    portal: anyio.from_thread.BlockingPortal
    client: httpx.AsyncClient
    ledger: Ledger
    tokens: dict[str, str]

    def request(self, method: str, path: str, *, token: str | None, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if token is not None:
            headers.update(auth(self.tokens.get(token, token)))
        call = functools.partial(self.client.request, method, path, headers=headers, **kw)
        return self.portal.call(call)

    def post(
        self, path: str, body: Any = None, *, token: str | None = "write", **kw: Any
    ) -> httpx.Response:
        if body is not None:
            kw["json"] = body
        return self.request("POST", path, token=token, **kw)

    def get(self, path: str, *, token: str | None = "read", **kw: Any) -> httpx.Response:
        return self.request("GET", path, token=token, **kw)


@contextlib.contextmanager
def running(app: FastAPI, ledger: Ledger, tokens: dict[str, str]) -> Iterator[Api]:
    """``app`` with its lifespan started, and a client over ``httpx.ASGITransport``."""
    with contextlib.ExitStack() as stack:
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        stack.enter_context(portal.wrap_async_context_manager(app.router.lifespan_context(app)))
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        client = httpx.AsyncClient(transport=transport, base_url="http://receiver.test")
        try:
            yield Api(portal, client, ledger, tokens)
        finally:
            portal.call(client.aclose)


# Ports for the receivers tests start, below the kernel's ephemeral range (32768-60999 on
# Linux), from which every client socket of every test takes its own port: a port picked
# from that range (bind to port 0) may be a client's by the time the receiver binds it
# (always on 0.0.0.0, which shares a port with no address). A port is taken at random and
# tried on every address first.
TEST_PORTS = range(20000, 32000)


def free_port() -> int:
    while True:
        port = random.choice(TEST_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        return port


def wait_until_serving(
    base_url: str,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Poll ``/healthz`` until it answers (a condition, bounded, never a fixed sleep); over
    https, ``verify`` is what the server's certificate is checked against. One client for
    every poll: ``httpx.get`` makes a client, and its TLS context, each time (some 25 ms of
    CPU, taken from the server that is starting)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with httpx.Client(timeout=1.0, verify=CLIENT_TLS if verify is True else verify) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"serve exited with {proc.returncode}")
            try:
                if client.get(f"{base_url}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    raise RuntimeError(f"{base_url} did not start")


@dataclass
class Running:
    """uvicorn serving in a thread: the server (to stop it, or to look at its connections),
    the thread, and the base URL."""

    server: uvicorn.Server
    thread: threading.Thread
    url: str


@contextlib.contextmanager
def uvicorn_thread(app: FastAPI, **settings: Any) -> Iterator[Running]:
    """Run ``app`` under uvicorn on a free loopback port in a thread, until the block ends.
    ``settings`` go to ``uvicorn.Config``; the HTTP protocol is the one ``serve`` runs
    (``auto``: httptools) unless ``http`` names another."""
    settings = {"log_level": "warning", "access_log": False, **settings}
    settings.setdefault("http", "auto")
    config = uvicorn.Config(app, host="127.0.0.1", port=0, **settings)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield Running(server, thread, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextlib.contextmanager
def server_thread(app: FastAPI, **settings: Any) -> Iterator[str]:
    """:func:`uvicorn_thread`, yielding its base URL."""
    with uvicorn_thread(app, **settings) as running:
        yield running.url


def serve_process(
    db: str,
    port: int,
    *,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    access_log: bool = False,
    args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``flowledger serve`` as a child process (its own interpreter, its own writer), with
    ``args`` after its own (``--host``, ``--tls-cert``...)."""
    full_env = {**os.environ, "FLOWLEDGER_SECRET": SECRET.decode(), **(env or {})}
    with contextlib.ExitStack() as stack:
        out: Any = stack.enter_context(open(log, "ab")) if log else subprocess.DEVNULL
        return _popen(full_env, out, db, port, access_log, args)


def _popen(
    full_env: dict[str, str],
    out: Any,
    db: str,
    port: int,
    access_log: bool,
    args: Sequence[str],
) -> subprocess.Popen[bytes]:
    serve = [sys.executable, "-m", "flowledger.cli", "serve"]
    serve.append("--access-log" if access_log else "--no-access-log")
    command = [*serve, "--db", db, "--port", str(port), *args]
    return subprocess.Popen(command, env=full_env, stdout=out, stderr=out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
