"""Two `flowledger run` on one PostgreSQL: one runs the jobs; kill it and the other takes over."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger, utcnow
from flowledger.storage import lease as leases
from flowledger.storage.engine import Store, open_store
from flowledger.storage.models import Event, Hold, Lease, table
from tests.support.builders import req
from tests.support.processes import TIMEOUT, env_for, spawn, wait_until

HOLDS = table(Hold)
EVENTS = table(Event)
LEASES = table(Lease)
pytestmark = [pytest.mark.crash, pytest.mark.postgres]


def due_operation(ledger: Ledger, name: str) -> None:
    ledger.dispatch(name, req(f"exec-{name}", deadline=utcnow() - timedelta(seconds=1))).run("wf")


def hold_actor(store: Store, operation_id: str) -> str | None:
    with store.reader.connect() as conn:
        return conn.execute(
            sa.select(EVENTS.c.actor).where(
                EVENTS.c.operation_id == operation_id, EVENTS.c.kind == "hold_opened"
            )
        ).scalar_one_or_none()


def lease_holder(store: Store) -> Any:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(LEASES.c.holder, LEASES.c.expires_at)).first()


def test_only_the_leaseholder_runs_jobs_and_another_takes_over_when_it_dies(
    pg_ledger: str, tmp_path: Path
) -> None:
    store = open_store(pg_ledger)
    ledger = Ledger(store)
    config = tmp_path / "flowledger.toml"
    # A short lease keeps the takeover quick; long enough that a loaded machine still renews
    # it (every third of it) before it runs out.
    config.write_text('[sweep]\ninterval = "100ms"\n\n[scheduler]\nlease = "6s"\n')
    env = env_for(pg_ledger, config)
    args = ["run", "--host", "127.0.0.1", "--port", "0"]
    a = spawn(args, env, tmp_path / "a.log")
    b = None
    try:
        wait_until(
            lambda: (row := lease_holder(store)) is not None and f":{a.pid}:" in row.holder,
            "the first process to take the lease",
        )
        b = spawn(args, env, tmp_path / "b.log")
        wait_until(lambda: "scheduler started" in (tmp_path / "b.log").read_text(), "b to start")
        for name in ("op-1", "op-2"):
            due_operation(ledger, name)
            wait_until(lambda n=name: hold_actor(store, n) is not None, f"a hold on {name}")
            assert f":{a.pid}:" in (hold_actor(store, name) or "")
        assert "taken by" not in (tmp_path / "b.log").read_text()
        assert (
            f"standing by: the scheduler lease is held by {lease_holder(store).holder} until "
            in (tmp_path / "b.log").read_text()
        )

        a.send_signal(signal.SIGKILL)
        a.wait(TIMEOUT)
        killed_at = utcnow()
        # The lease's time passes: a's last renewal runs out now rather than up to 6 s on, so
        # b's next renewal (every 2 s) finds it expired. Nothing renews it: a is gone.
        with store.engine.begin() as conn:
            leases.expire(conn, "scheduler", lease_holder(store).holder, killed_at)
        due_operation(ledger, "op-3")
        wait_until(lambda: hold_actor(store, "op-3") is not None, "b to take over and sweep")
        assert f":{b.pid}:" in (hold_actor(store, "op-3") or "")
        assert "taken by" in (tmp_path / "b.log").read_text()
        row = lease_holder(store)
        assert f":{b.pid}:" in row.holder and row.expires_at > killed_at

        b.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal so the exit says why.
        assert b.wait(TIMEOUT) in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in (tmp_path / "b.log").read_text()
        row = lease_holder(store)
        assert row.expires_at <= utcnow()  # released on a clean stop
        with store.reader.connect() as conn:
            per_op = conn.execute(
                sa.select(HOLDS.c.operation_id, sa.func.count()).group_by(HOLDS.c.operation_id)
            ).all()
        assert sorted(per_op) == [("op-1", 1), ("op-2", 1), ("op-3", 1)]
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(TIMEOUT)
        store.dispose()
