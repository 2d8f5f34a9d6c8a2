"""One of two processes that dispatch the same operations at the same moments, each from an
execution of its own of one workflow: twin triggers recorded by both processes at once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import open_store

# Both processes' clocks stand still at one moment: every pair is 0 ms apart, on one day.
NOW = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def twins_race(db: str, name: str, rounds: int, barrier: Any, results: Any) -> None:
    """Each round: ``a-i`` then ``b-i`` (left), or ``b-i`` then ``a-i`` (right), each in a
    transaction of its own."""
    store = open_store(db)
    ledger = Ledger(store, clock=lambda: NOW)
    decisions: dict[str, str | None] = {}
    for i in range(rounds):
        ops = [f"a-{i}", f"b-{i}"]
        if name == "right":
            ops.reverse()
        barrier.wait()
        for op in ops:
            body = DispatchInput(
                processing_version="v1",
                execution_id=f"{name}-{i}",
                input={"round": i},
                has_input=True,
                workflow_id="wf-1",
                source="prod-n8n",
            )
            decisions[op] = ledger.dispatch(op, body).run(f"token:{name}").decision
    store.dispose()
    results.put((name, decisions))
