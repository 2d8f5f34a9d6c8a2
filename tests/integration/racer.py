"""One of two processes that dispatch the same operations at the same moments."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import open_store


def race(db: str, name: str, rounds: int, batched: bool, barrier: Any, results: Any) -> None:
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


def two_racers(target: Callable[..., None], db: str, *args: Any) -> dict[str, Any]:
    """Run ``target(db, name, *args, barrier, results)`` in two spawned processes, ``left``
    and ``right``, that meet at a barrier before each round; what each put in ``results``, by
    name. Both must exit cleanly."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2, timeout=120), ctx.Queue()
    procs = [
        ctx.Process(target=target, args=(db, name, *args, barrier, results))
        for name in ("left", "right")
    ]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return outcomes
