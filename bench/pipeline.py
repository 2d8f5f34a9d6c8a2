"""Group commit on PostgreSQL with and without psycopg's pipeline, taking turns in one run.

    FLOWLEDGER_BENCH_PG_URL=postgresql://… python -m bench.pipeline [--pairs 512] [--batch 64]

In process, on a fresh database: dispatch+confirm pairs through ``Ledger.run_many`` in batches
(the receiver's group commit without HTTP), alternating rounds with every unit's statements
pipelined (what the receiver does) and sent one at a time (``Tx.pipeline`` made a no-op for the
round). Prints transitions/s and round trips per transition of each, and the ratio of medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.baselines import fresh_postgres
from flowledger.plumbing.metrics import DB_ROUND_TRIPS
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.migrate import init_ledger
from flowledger.storage.tx import Tx


def _trips() -> float:
    return sum(
        s.value for m in DB_ROUND_TRIPS.collect() for s in m.samples if s.name.endswith("_total")
    )


def pairs(ledger: Ledger, tag: str, count: int, batch: int) -> tuple[float, float]:
    """Transitions/s and round trips per transition for ``count`` pairs in batches."""
    started, trips = time.perf_counter(), _trips()
    for lo in range(0, count, batch):
        ops = [f"{tag}-{i}" for i in range(lo, min(count, lo + batch))]
        dispatches = [
            ("token:bench", ledger.dispatch(op, DispatchInput(
                processing_version="v1", execution_id=f"e-{op}", input={"op": op},
                has_input=True, run_index=0,
            )).work)
            for op in ops
        ]  # fmt: skip
        for outcome in ledger.run_many(dispatches):
            assert outcome.error is None and outcome.value.decision == "go", outcome
        confirms = [("token:bench", ledger.confirm(op, f"R-{op}").work) for op in ops]
        for outcome in ledger.run_many(confirms):
            assert outcome.error is None, outcome
    elapsed = time.perf_counter() - started
    return 2 * count / elapsed, (_trips() - trips) / (2 * count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=512, help="pairs per round")
    parser.add_argument("--batch", type=int, default=64, help="units per commit")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each way")
    args = parser.parse_args()
    server = os.environ.get("FLOWLEDGER_BENCH_PG_URL") or os.environ.get("FLOWLEDGER_TEST_PG_URL")
    if not server:
        sys.exit("set FLOWLEDGER_BENCH_PG_URL to a PostgreSQL server")
    pipelined = Tx.pipeline
    one_at_a_time: Callable[[Tx], None] = lambda tx: None  # noqa: E731
    ways: dict[str, Any] = {"pipelined": pipelined, "one at a time": one_at_a_time}
    rates: dict[str, list[float]] = {w: [] for w in ways}
    trips: dict[str, float] = {}
    with fresh_postgres(server) as url:
        store, _ = init_ledger(url)
        try:
            ledger = Ledger(store)
            pairs(ledger, "warm", args.batch * 4, args.batch)
            for r in range(args.rounds):
                order = list(ways) if r % 2 == 0 else list(reversed(ways))
                for way in order:
                    Tx.pipeline = ways[way]  # type: ignore[method-assign]
                    rate, trips[way] = pairs(ledger, f"{r}-{way[0]}", args.pairs, args.batch)
                    rates[way].append(rate)
        finally:
            Tx.pipeline = pipelined  # type: ignore[method-assign]
            store.dispose()
    for way, found in rates.items():
        print(
            f"{way:>14}: {min(found):,.0f}-{max(found):,.0f} transitions/s "
            f"(median {statistics.median(found):,.0f}), {trips[way]:.2f} round trips a transition"
        )
    ratio = statistics.median(rates["pipelined"]) / statistics.median(rates["one at a time"])
    print(f"ratio of medians pipelined / one at a time: {ratio:.2f}")


if __name__ == "__main__":
    main()
