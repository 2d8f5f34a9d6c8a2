"""SIGKILL in the middle of a sweep, then sweep again: every hold with its one event, none twice.

On PostgreSQL a sweep's batches overlap (the next one reads and locks its rows while the one
before writes), so the kill lands with two transactions open; on SQLite with one.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.config import SweepConfig
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.reads import chain
from tests.support.builders import T0, req
from tests.support.processes import kill_module_at

DUE, BATCH, PASSED = 600, 50, 3  # the fourth batch to reach its commit is killed there


def holds_and_events(store: Any) -> tuple[list[str], list[int], list[int]]:
    with store.engine.connect() as conn:
        held = conn.execute(sa.text("SELECT operation_id FROM holds ORDER BY id")).scalars().all()
        ids = conn.execute(sa.text("SELECT id FROM holds ORDER BY id")).scalars().all()
        opened = (
            conn.execute(
                sa.text("SELECT hold_id FROM events WHERE kind = 'hold_opened' ORDER BY hold_id")
            )
            .scalars()
            .all()
        )
    return list(held), list(ids), list(opened)


@pytest.mark.crash
def test_a_sweep_killed_mid_batch_keeps_each_hold_with_its_event(
    db_url: str, store: Store, tmp_path: Path
) -> None:
    ledger = Ledger(store, clock=lambda: T0)
    for n in range(DUE):
        ledger.dispatch(f"op-{n:04d}", req(f"e-{n}")).run("wf")
    store.dispose()
    later = T0 + timedelta(days=1)
    kill_module_at(
        "before_commit",
        ["tests.crash.sweep_child", db_url, later.isoformat(), str(BATCH)],
        {**os.environ, "FLOWLEDGER_CRASH_SKIP": str(PASSED)},
        tmp_path,
    )

    store = open_store(db_url)
    try:
        held, ids, opened = holds_and_events(store)
        # Whole batches only: those that committed before the kill (another batch in flight
        # may have committed beside the one that was stopped).
        assert PASSED * BATCH <= len(held) <= (PASSED + 1) * BATCH
        assert len(held) % BATCH == 0
        assert opened == ids  # every hold with its one event, no event without its hold
        with store.engine.connect() as conn:
            assert chain.verify(conn).ok
        result = Sweep(Ledger(store, clock=lambda: later), SweepConfig(), batch=BATCH).run()
        assert result.opened["unknown_outcome"] == DUE - len(held)
        held, ids, opened = holds_and_events(store)
        assert sorted(held) == [f"op-{n:04d}" for n in range(DUE)]
        assert opened == ids
        with store.engine.connect() as conn:
            assert chain.verify(conn).ok
    finally:
        store.dispose()
