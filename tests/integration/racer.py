"""One of two processes that dispatch the same operations at the same moments."""

from __future__ import annotations

from typing import Any

from ledger.storage.engine import open_store
from ledger.writer.services import DispatchInput, Ledger


def race(db: str, name: str, rounds: int, barrier: Any, results: Any) -> None:
    store = open_store(db)
    ledger = Ledger(store)
    decisions = []
    for i in range(rounds):
        barrier.wait()  # both processes leave the barrier together, then dispatch
        answer = ledger.dispatch(
            f"race-{i}",
            DispatchInput(
                processing_version="v1",
                execution_id=f"{name}-{i}",
                input={"round": i},
                has_input=True,
            ),
        ).run(f"token:{name}")
        decisions.append((i, answer.decision, answer.reason))
    store.dispose()
    results.put((name, decisions))
