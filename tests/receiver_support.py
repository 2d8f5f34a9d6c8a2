"""Helpers for the receiver's tests: tokens, database snapshots, and servers on real sockets
(uvicorn in a thread, or ``flowledger serve`` in a subprocess)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI
from sqlmodel import SQLModel

from ledger.receiver.tokens import create_token
from ledger.storage.engine import Store
from ledger.writer.services import Ledger

SECRET = b"test-server-secret"
STARTUP_TIMEOUT = 30.0


def make_token(ledger: Ledger, name: str, scope: str = "write", *, signing: bool = False) -> str:
    return create_token(ledger, name, scope, signing=signing, server_secret=SECRET).token


def make_signing_token(ledger: Ledger, name: str) -> tuple[str, bytes]:
    made = create_token(ledger, name, "write", signing=True, server_secret=SECRET)
    assert made.signing_secret is not None
    return made.token, bytes.fromhex(made.signing_secret)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def signature(key: bytes, body: bytes, stamp: int | None = None) -> str:
    stamp = int(time.time()) if stamp is None else stamp
    mac = hmac.new(key, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={mac}"


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, for "the database did not change" assertions."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.reader.connect() as conn:
        for name, tbl in sorted(SQLModel.metadata.tables.items()):
            rows = conn.execute(sa.select(tbl)).all()
            out[name] = sorted((tuple(r) for r in rows), key=repr)
    return out


def dispatch_body(execution_id: str = "exec-1", **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "processing_version": "v1",
        "execution_id": execution_id,
        "workflow_id": "wf-1",
        "step": "send invoice",
        "run_index": 0,
        "input": {"invoice": "INV-42", "amount": 1200},
    }
    body.update(kw)
    return body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(base_url: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``/healthz`` until it answers (a condition, bounded, never a fixed sleep)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"{base_url} did not start")


@contextlib.contextmanager
def server_thread(app: FastAPI) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port in a thread; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def serve_process(
    db: str,
    port: int,
    *,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    access_log: bool = False,
) -> subprocess.Popen[bytes]:
    """``flowledger serve`` as a child process (its own interpreter, its own writer)."""
    full_env = {**os.environ, "FLOWLEDGER_SECRET": SECRET.decode(), **(env or {})}
    with contextlib.ExitStack() as stack:
        out: Any = stack.enter_context(open(log, "ab")) if log else subprocess.DEVNULL
        return _popen(full_env, out, db, port, access_log)


def _popen(
    full_env: dict[str, str], out: Any, db: str, port: int, access_log: bool
) -> subprocess.Popen[bytes]:
    serve = [sys.executable, "-m", "ledger.cli", "serve"]
    serve.append("--access-log" if access_log else "--no-access-log")
    command = [*serve, "--db", db, "--port", str(port)]
    return subprocess.Popen(command, env=full_env, stdout=out, stderr=out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
