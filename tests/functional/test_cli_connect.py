"""A source that cannot be connected to is said in seconds: ``connect_timeout`` reaches the
HTTP client, and ``sync --once`` gives up fast against a loopback socket that never accepts
(and one that refuses), never an outside address."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli.common import app
from flowledger.config import SourceConfig
from flowledger.sync import connect
from tests.support.cli import cli_workdir

# Far under the 31 s the backoff used to spend on a tool that is down, far over what these
# runs take (about one connect timeout); the timeout itself is checked by structure below.
GENEROUS = 15.0


@pytest.fixture
def never_accepts() -> Iterator[int]:
    """A loopback port whose accept queue is full: the kernel drops further connection
    attempts, so connecting hangs until the client's connect timeout."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        held: list[socket.socket] = []
        try:
            for _ in range(16):
                probe = socket.socket()
                probe.settimeout(0.5)
                try:
                    probe.connect(("127.0.0.1", port))
                except TimeoutError:
                    probe.close()
                    break
                held.append(probe)
            else:
                pytest.skip("this kernel accepts past the listen backlog")
            yield port
        finally:
            for s in held:
                s.close()


@pytest.fixture
def refuses() -> Iterator[int]:
    """A loopback port bound and not listening: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def configure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: int, extra: str = "") -> None:
    config = f"""
[[sources]]
name = "down"
kind = "n8n"
base_url = "http://127.0.0.1:{port}"
api_key_env = "TEST_N8N_API_KEY"
{extra}
"""
    cli_workdir(tmp_path, monkeypatch, config, TEST_N8N_API_KEY="k" * 20)


def test_the_configured_connect_timeout_reaches_the_http_client() -> None:
    cfg = SourceConfig(
        name="s", kind="n8n", base_url="http://127.0.0.1:1", connect_timeout="750ms", timeout=20
    )
    with connect.make_client(cfg) as client:
        assert client.timeout.connect == 0.75
        assert client.timeout.read == 20.0
    default = SourceConfig(name="s", kind="n8n", base_url="http://127.0.0.1:1")
    with connect.make_client(default) as client:
        assert client.timeout.connect == 5.0


def test_a_connect_timeout_over_ten_minutes_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 10m"):
        SourceConfig(name="s", kind="n8n", base_url="http://h", connect_timeout="1h")


def test_sync_once_against_a_socket_that_never_accepts_fails_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, never_accepts: int
) -> None:
    configure(tmp_path, monkeypatch, never_accepts, 'connect_timeout = "1s"')
    started = time.monotonic()
    result = CliRunner().invoke(app, ["sync", "--once"])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "down: ERROR: cannot reach n8n at http://127.0.0.1:" in result.output
    assert "nothing accepted the connection within 1 s (connect_timeout" in result.output
    assert took < GENEROUS
    listing = CliRunner().invoke(app, ["sources"]).output
    assert "nothing accepted the connection" in listing


def test_sync_once_against_a_refusing_port_gives_up_after_one_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuses: int
) -> None:
    configure(tmp_path, monkeypatch, refuses)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["sync", "--once"])
    took = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert "down: ERROR: cannot reach n8n" in result.output
    assert "refused (is n8n running there? check the host and port in base_url)" in result.output
    assert took < GENEROUS
