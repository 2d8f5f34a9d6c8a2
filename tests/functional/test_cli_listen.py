"""``run`` and ``serve`` bind their port before anything else: a port that is taken, or a host
that is not this machine's, is one line on stderr and exit 2, with nothing printed before it
and nothing started (run as a person runs them, in a child process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.ledgers import new_ledger
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for


def flowledger(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    db = tmp_path / "ledger.db"
    if not db.exists():
        new_ledger(db).dispose()
    config = tmp_path / "flowledger.toml"
    config.write_text("")
    return subprocess.run(
        [FLOWLEDGER, *args],
        env=env_for(str(db), config),
        cwd=tmp_path,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_taken_port_is_one_line_and_nothing_before_it(
    tmp_path: Path, taken: int, command: str
) -> None:
    done = flowledger(tmp_path, command, "--host", "127.0.0.1", "--port", str(taken))
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"flowledger: cannot listen on 127.0.0.1:{taken}: address already in use\n"
    )


@pytest.mark.parametrize("command", ["run", "serve"])
def test_a_host_that_is_not_an_address_is_one_line(tmp_path: Path, command: str) -> None:
    done = flowledger(tmp_path, command, "--host", "no such host.invalid", "--port", "0")
    assert done.returncode == 2
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("flowledger: cannot listen on no such host.invalid:0: ")


def test_a_host_of_another_machine_is_one_line(tmp_path: Path) -> None:
    # 192.0.2.0/24 is reserved for documentation: never an address of this machine.
    done = flowledger(tmp_path, "serve", "--host", "192.0.2.1", "--port", "0")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode() == (
        "flowledger: cannot listen on 192.0.2.1:0: cannot assign requested address\n"
    )
