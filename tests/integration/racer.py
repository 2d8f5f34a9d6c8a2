"""One of two processes that dispatch the same operations at the same moments."""

from __future__ import annotations

from typing import Any

from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import open_store


def race(db: str, name: str, rounds: int, barrier: Any, results: Any, batched: bool) -> None:
    """``batched``: each round's dispatch goes through group commit (``run_many``), between
    a dispatch of an operation of this process's own before it and one after it."""
    store = open_store(db)
    ledger = Ledger(store)
    decisions = []
    for i in range(rounds):
        barrier.wait()  # both processes leave the barrier together, then dispatch
        racing = ledger.dispatch(f"race-{i}", _dispatch(f"{name}-{i}", i))
        if not batched:
            answer = racing.run(f"token:{name}")
        else:
            own = [ledger.dispatch(f"{name}-{i}-{n}", _dispatch(f"{name}-{i}", i)) for n in (1, 2)]
            units = [(f"token:{name}", c.work) for c in (own[0], racing, own[1])]
            outcomes = ledger.run_many(units)
            assert [o.value.decision for o in outcomes[::2]] == ["go", "go"], outcomes
            answer = outcomes[1].value
        decisions.append((i, answer.decision, answer.reason))
    store.dispose()
    results.put((name, decisions))


def _dispatch(execution_id: str, round_: int) -> DispatchInput:
    return DispatchInput(
        processing_version="v1", execution_id=execution_id, input={"round": round_}, has_input=True
    )
