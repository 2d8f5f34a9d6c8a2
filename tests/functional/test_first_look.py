"""The README's first look, followed as written: the shell blocks of that section run with bash
in a directory of their own, against a real ``flowledger run`` on a free port, with the
command where ``make run`` puts it (``.venv/bin/flowledger``: here a script that runs the
installed one, and stands ``status`` in for ``tui``, since a test has no terminal). Then a
sweep past the dispatch deadline must find nothing of the first look to hold: its operation
confirmed, no hold opened. Change the README so that its steps stop working, or leave an
operation dispatching, and this fails. The section's second block makes a hold appear, as it
says: a dispatch with a deadline already here, then ``flowledger sweep --once``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from flowledger.storage.engine import open_store
from flowledger.storage.reads.records import operation_detail
from tests.support.processes import FLOWLEDGER, ROOT, TIMEOUT, wait_until
from tests.support.receiver import auth, free_port, stop, wait_until_serving

OPERATION = "invoice:INV-42:send"
HELD = "invoice:INV-44:send"  # the one the first look's second block leaves to the sweep
CONTROL = "first-look-test:never-confirmed"  # dispatched by the test, left dispatching
PORT_IN_README = "127.0.0.1:8787"
# The command in a checkout's .venv: the installed one, with `tui` shown as `status`.
WRAPPER = """#!/bin/sh
if [ "$1" = tui ]; then shift; set -- status "$@"; fi
exec {flowledger} "$@"
"""

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="the first look uses curl")


def first_look_blocks() -> list[str]:
    """The ```sh blocks of the README's "A first look" section, in order."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## A first look\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)


@dataclass
class Checkout:
    """A directory laid out as a checkout after ``make run``: ``.venv/bin/flowledger`` and
    ``./var/flowledger.db``, with ``flowledger run`` serving it on ``port``."""

    path: Path
    port: int
    env: dict[str, str]

    def bash(self, script: str) -> subprocess.CompletedProcess[str]:
        return self.run("bash", "-euo", "pipefail", "-c", script.replace(PORT_IN_README, self.at))

    def flowledger(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.path / ".venv/bin/flowledger"), *args)

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    @property
    def at(self) -> str:
        return f"127.0.0.1:{self.port}"

    def detail(self, operation_id: str) -> dict[str, object]:
        store = open_store(str(self.path / "var/flowledger.db"))
        try:
            found = operation_detail(store, operation_id)
        finally:
            store.dispose()
        assert found is not None, f"no operation {operation_id}"
        return {"operation": found.operation, "holds": found.holds}


def without_flowledger_on_path() -> str:
    """``PATH`` without the folders that hold a ``flowledger``: the README must say how to
    call it."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not (Path(f) / "flowledger").exists())


@pytest.fixture
def laid_out(tmp_path: Path) -> Checkout:
    """The checkout after ``make run``'s ``init``, with nothing serving it yet."""
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / "flowledger"
    wrapper.write_text(WRAPPER.format(flowledger=FLOWLEDGER))
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLEDGER_")}
    # Every dispatch's deadline a second after it, so that the sweep below is past it.
    env.update(PATH=without_flowledger_on_path(), FLOWLEDGER_DISPATCH_DEADLINE_SECONDS="1")
    port = free_port()
    out = Checkout(tmp_path, port, env)
    # What `make run` runs first.
    assert out.flowledger("init", "--db", "./var/flowledger.db").returncode == 0
    return out


@pytest.fixture
def checkout(laid_out: Checkout) -> Iterator[Checkout]:
    """The checkout with ``flowledger run`` serving it, as `make run` leaves it, on the test's
    port."""
    command = [str(laid_out.path / ".venv/bin/flowledger"), "run", "--db", "./var/flowledger.db"]
    with (laid_out.path / "run.log").open("wb") as log:
        run = subprocess.Popen(
            [*command, "--port", str(laid_out.port)],
            cwd=laid_out.path,
            env=laid_out.env,
            stdout=log,
            stderr=log,
        )
    try:
        wait_until_serving(f"http://{laid_out.at}", run)
        yield laid_out
    finally:
        stop(run)


def dispatch_left_unconfirmed(checkout: Checkout) -> None:
    """An operation the first look never touches, dispatched and never confirmed: the sweep
    must hold it, which shows that the sweep ran past the deadlines."""
    made = checkout.flowledger("token", "create", "--name", "control", "--scope", "write")
    token = made.stdout.splitlines()[1]
    answer = httpx.post(
        f"http://{checkout.at}/v1/operations/{CONTROL}/dispatch",
        headers=auth(token),
        json={"input": {"n": 1}, "processing_version": "v1", "execution_id": "99"},
        timeout=TIMEOUT,
    )
    assert answer.json()["decision"] == "go", answer.text


def deadline_of(checkout: Checkout, operation_id: str) -> datetime:
    operation = checkout.detail(operation_id)["operation"]
    assert isinstance(operation, dict)
    deadline = operation["deadline"]
    assert isinstance(deadline, datetime)
    return deadline if deadline.tzinfo else deadline.replace(tzinfo=UTC)


def test_the_first_look_leaves_nothing_dispatching(checkout: Checkout) -> None:
    look, _, _ = first_look_blocks()
    assert PORT_IN_README in look and "localhost" not in look
    done = checkout.bash(look)
    assert done.returncode == 0, done.stderr
    assert '"decision":"go"' in done.stdout, done.stdout
    assert '"state":"confirmed"' in done.stdout, done.stdout

    dispatch_left_unconfirmed(checkout)
    due = max(deadline_of(checkout, OPERATION), deadline_of(checkout, CONTROL))
    wait_until(lambda: datetime.now(UTC) > due, "the dispatch deadlines to pass")
    swept = checkout.flowledger("sweep", "--once")
    assert swept.returncode == 0, swept.stderr

    control = checkout.detail(CONTROL)["holds"]
    assert isinstance(control, list)
    assert [h["reason"] for h in control] == ["unknown_outcome"]
    first = checkout.detail(OPERATION)
    assert first["holds"] == []
    operation = first["operation"]
    assert isinstance(operation, dict)
    assert operation["state"] == "confirmed" and operation["receipt"]


def test_the_first_look_makes_a_hold_appear(checkout: Checkout) -> None:
    look, hold, _ = first_look_blocks()
    assert PORT_IN_README in hold and "sweep --once" in hold
    done = checkout.bash(f"{look}\n{hold}")  # one terminal: the token of the first block
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"decision":"go"') == 2, done.stdout
    assert HELD in done.stdout  # `flowledger holds` lists it
    holds = checkout.detail(HELD)["holds"]
    assert isinstance(holds, list)
    assert [(h["reason"], h["resolved_at"]) for h in holds] == [("unknown_outcome", None)]
    assert checkout.detail(OPERATION)["holds"] == []


def test_the_demo_step_runs_twice(laid_out: Checkout) -> None:
    """The demo talks to no receiver: the checkout needs nothing serving it."""
    checkout = laid_out
    look, _, demo = first_look_blocks()
    # The same terminal as the first block: the line that puts the command on PATH.
    (path_line,) = [line for line in look.splitlines() if line.startswith("export PATH=")]
    demo = f"{path_line}\n{demo}"
    first = checkout.bash(demo)
    assert first.returncode == 0, first.stderr
    assert "made-up data" in first.stdout
    again = checkout.bash(demo)
    assert again.returncode == 0, again.stderr
    assert "as built before" in again.stdout
