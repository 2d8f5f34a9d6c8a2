"""Crash safety, tested by crashing: a workflow process is killed at named points, then runs
again as n8n would after a crash (a new execution), and the database is checked.

Each run is synchronised by a signal file the crash point writes, never by sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from flowledger.domain import FailOutcome
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain
from flowledger.storage.reads import records as queries

pytestmark = pytest.mark.crash
OP = "invoice:INV-42:send"
INPUT = {"invoice": "INV-42", "amount": 1200}
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    code: int
    answers: list[dict[str, dict[str, object]]]


def run_workflow(
    db: str,
    target: Path,
    execution_id: str,
    *,
    crash_at: str | None = None,
    mode: str = "wait",
    tmp: Path,
    input: object = INPUT,
) -> Run:
    """Run one workflow step; with ``crash_at`` it dies there (SIGKILL from this test once
    the signal file appears, or ``os._exit`` inside the process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOWLEDGER_CRASH")}
    signal_file = tmp / f"signal-{execution_id}"
    if crash_at:
        env.update(
            FLOWLEDGER_CRASH_AT=crash_at,
            FLOWLEDGER_CRASH_SIGNAL=str(signal_file),
            FLOWLEDGER_CRASH_MODE=mode,
        )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.crash.workflow",
            db,
            OP,
            execution_id,
            json.dumps(input),
            str(target),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if crash_at and mode == "wait":
        wait_for_signal(proc, signal_file)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    if crash_at:
        assert signal_file.read_text() == crash_at, err
        assert proc.returncode == (-signal.SIGKILL if mode == "wait" else 70), err
    else:
        assert proc.returncode == 0, err
    return Run(proc.returncode, [json.loads(line) for line in out.splitlines() if line])


def wait_for_signal(proc: subprocess.Popen[str], signal_file: Path) -> None:
    """Block until the process reports it stands at its crash point."""
    deadline = time.monotonic() + 120
    while not signal_file.exists():
        if proc.poll() is not None:
            raise AssertionError(f"worker ended before its crash point: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("worker never reached its crash point")
        time.sleep(0.002)


def writes(target: Path) -> int:
    return len(target.read_text().splitlines()) if target.exists() else 0


def state(store: Store) -> tuple[str | None, str | None]:
    detail = queries.operation_detail(store, OP)
    if detail is None:
        return None, None
    return detail.operation["state"], detail.operation["receipt"]


@pytest.fixture
def ledger_db(db_url: str, store: Store) -> str:
    store.dispose()  # the children open it themselves
    return db_url


def reopen(db: str) -> Store:
    from flowledger.storage.engine import open_store

    return open_store(db)


def assert_chain_intact(store: Store) -> None:
    with store.reader.connect() as conn:
        assert chain.verify(conn).ok


CRASHES = [
    # point, mode, (state, writes) after the crash, (decision, state, writes) after restart
    ("before_dispatch_write", "wait", (None, 0), ("go", "confirmed", 1)),
    # The events and the Merkle subtrees they complete are written, not committed: neither
    # is there after the crash (assert_chain_intact checks the tree against the events).
    ("before_commit", "wait", (None, 0), ("go", "confirmed", 1)),
    ("after_dispatch_commit", "wait", ("dispatching", 0), ("hold", "dispatching", 0)),
    ("after_dispatch_commit", "exit", ("dispatching", 0), ("hold", "dispatching", 0)),
    ("after_external_write", "wait", ("dispatching", 1), ("hold", "dispatching", 1)),
    ("after_confirm_update", "wait", ("dispatching", 1), ("hold", "dispatching", 1)),
    ("after_confirm_update", "exit", ("dispatching", 1), ("hold", "dispatching", 1)),
    ("after_confirm_commit", "wait", ("confirmed", 1), ("skip", "confirmed", 1)),
]


@pytest.mark.parametrize(
    ("point", "mode", "after_crash", "after_restart"),
    CRASHES,
    ids=[f"{p}-{m}" for p, m, _, _ in CRASHES],
)
def test_crash_then_restart_never_writes_twice(
    ledger_db: str,
    tmp_path: Path,
    point: str,
    mode: str,
    after_crash: tuple[str | None, int],
    after_restart: tuple[str, str, int],
) -> None:
    target = tmp_path / "target.log"
    run_workflow(ledger_db, target, "exec-1", crash_at=point, mode=mode, tmp=tmp_path)
    store = reopen(ledger_db)
    try:
        assert (state(store)[0], writes(target)) == after_crash
        assert_chain_intact(store)
    finally:
        store.dispose()

    # n8n after a crash: the execution is marked crashed; a retry is a new execution.
    restart = run_workflow(ledger_db, target, "exec-2", tmp=tmp_path)
    decision = restart.answers[0]["dispatch"]["decision"]
    store = reopen(ledger_db)
    try:
        st, receipt = state(store)
        assert (decision, st, writes(target)) == after_restart
        if st == "confirmed":
            assert receipt == "T-1"  # the one write's own id, never a second one
        assert_chain_intact(store)
    finally:
        store.dispose()


def test_unknown_outcome_is_never_resolved_by_restarts(ledger_db: str, tmp_path: Path) -> None:
    """After the write but before the confirm: no number of restarts confirms or re-prepares
    the operation by itself; only a person's decision with evidence does."""
    target = tmp_path / "target.log"
    run_workflow(ledger_db, target, "exec-1", crash_at="after_external_write", tmp=tmp_path)
    for n in range(2, 5):
        answer = run_workflow(ledger_db, target, f"exec-{n}", tmp=tmp_path).answers[0]
        assert answer["dispatch"]["decision"] == "hold"
    store = reopen(ledger_db)
    try:
        assert state(store) == ("dispatching", None)
        assert writes(target) == 1
        ledger = Ledger(store)
        hold = ledger.fail(OP, FailOutcome.UNKNOWN, "execution crashed").run("t").hold_ids[0]
        ledger.resolve(
            hold, "confirm", receipt="T-1", note="line 1 of the target", operator="ana"
        ).run()
        assert state(store) == ("confirmed", "T-1")
    finally:
        store.dispose()
    again = run_workflow(ledger_db, target, "exec-9", tmp=tmp_path).answers[0]
    assert again["dispatch"]["decision"] == "skip" and writes(target) == 1


@pytest.mark.parametrize("point", ["after_dispatch_commit", "after_confirm_commit"])
def test_restart_with_changed_input_is_held(ledger_db: str, tmp_path: Path, point: str) -> None:
    target = tmp_path / "target.log"
    run_workflow(ledger_db, target, "exec-1", crash_at=point, tmp=tmp_path)
    before = writes(target)
    changed = {**INPUT, "amount": 9999}
    restart = run_workflow(ledger_db, target, "exec-2", tmp=tmp_path, input=changed)
    answer = restart.answers[0]["dispatch"]
    assert (answer["decision"], answer["reason"]) == ("hold", "input_mismatch")
    assert writes(target) == before
    store = reopen(ledger_db)
    try:
        detail = queries.operation_detail(store, OP)
        assert detail is not None
        assert [h["reason"] for h in detail.holds] == ["input_mismatch"]
    finally:
        store.dispose()
