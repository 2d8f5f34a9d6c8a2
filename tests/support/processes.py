"""Running ``flowledger`` in child processes, and waiting for what they leave behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

FLOWLEDGER = str(Path(sys.executable).parent / "flowledger")
ROOT = Path(__file__).resolve().parents[2]  # the repository, where ``python -m tests…`` runs
TIMEOUT = 60.0  # a generous bound on waiting for an observable event


def env_for(db: str, config: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLEDGER_CRASH")}
    env.update(FLOWLEDGER_DB=db, FLOWLEDGER_CONFIG=str(config), **extra)
    return env


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([FLOWLEDGER, *args], env=env, stdout=out, stderr=out)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def kill_at(point: str, args: list[str], env: dict[str, str], workdir: Path) -> None:
    """Run ``flowledger ARGS`` until it reaches the crash point ``point``, then SIGKILL it
    (its output in ``workdir/child.log``)."""
    signal_file = workdir / f"crashed-{point}"
    crash = {**env, "FLOWLEDGER_CRASH_AT": point, "FLOWLEDGER_CRASH_SIGNAL": str(signal_file)}
    child = spawn(args, crash, workdir / "child.log")
    try:
        wait_until(signal_file.exists, f"the child to reach {point}")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(TIMEOUT)


def wait_for_signal(path: Path, proc: subprocess.Popen[bytes], timeout: float = TIMEOUT) -> str:
    """Block until the child has written the crash point's name (or has died)."""

    def reached() -> bool:
        if path.exists() and path.read_text():
            return True
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"the child exited ({proc.returncode}) before the point: {out}")
        return False

    wait_until(reached, "the child to reach the crash point", timeout)
    return path.read_text()


def kill_module_at(point: str, module: list[str], env: dict[str, str], workdir: Path) -> None:
    """Run ``python -m MODULE…`` from the repository until it reaches the crash point
    ``point``, then SIGKILL it; fails if it died or ended before the point."""
    flag = workdir / f"crashed-{point}"
    crash = {**env, "FLOWLEDGER_CRASH_AT": point, "FLOWLEDGER_CRASH_SIGNAL": str(flag)}
    proc = subprocess.Popen(
        [sys.executable, "-m", *module],
        cwd=ROOT,
        env=crash,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert wait_for_signal(flag, proc) == point
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
