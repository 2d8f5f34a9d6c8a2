"""What ``verify --deep`` costs beside the plain chain walk, and that its memory stays flat as
the ledger grows.

``python -m bench.verify [--ops N]``: two fresh SQLite ledgers written through the services in
group-commit batches (dispatch and confirm, every tenth operation left with an unknown outcome
and its hold), of N and 4N operations. For each: the plain chain walk's time (the baseline),
the deep replay's time and its ratio to the walk, and the peak Python memory of each (measured
in a second run under ``tracemalloc``). Flat memory shows as a 4N/N ratio near 1 for the deep
replay, which reads a range of operations at a time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flowledger.domain import FailOutcome
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import Store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import chain
from flowledger.storage.reads.replay import deep_verify

BATCH = 250


def build(store: Store, ops: int) -> int:
    ledger = Ledger(store)
    for start in range(0, ops, BATCH):
        ids = [f"op:{n:08d}" for n in range(start, min(ops, start + BATCH))]
        ledger.run_many([("token:bench", ledger.dispatch(i, request(i)).work) for i in ids])
        ledger.run_many(
            [
                (
                    "token:bench",
                    ledger.fail(i, FailOutcome.UNKNOWN, "timeout").work
                    if n % 10 == 0
                    else ledger.confirm(i, f"R-{i}").work,
                )
                for n, i in enumerate(ids, start=start)
            ]
        )
    with store.reader.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM events")).scalar() or 0)


def request(operation_id: str) -> DispatchInput:
    return DispatchInput(
        processing_version="v1",
        execution_id=f"ex-{operation_id}",
        input={"id": operation_id},
        has_input=True,
        run_index=0,
    )


def timed(store: Store, check: Callable[[sa.Connection], Any]) -> tuple[float, int, Any]:
    """Seconds, then peak traced bytes (a second run), and the check's answer."""
    with store.reader.connect() as conn:
        started = time.perf_counter()
        answer = check(conn)
        seconds = time.perf_counter() - started
    tracemalloc.start()
    with store.reader.connect() as conn:
        check(conn)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    args = parser.parse_args()
    peaks: dict[str, list[int]] = {"walk": [], "deep": []}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (args.ops, 4 * args.ops):
            store, _ = init_ledger(str(Path(tmp) / f"ledger-{size}.db"))
            events = build(store, size)
            walk_s, walk_peak, walked = timed(store, chain.verify)
            deep_s, deep_peak, deep = timed(store, deep_verify)
            store.dispose()
            assert walked.ok and deep.ok, deep.findings[:3]
            peaks["walk"].append(walk_peak)
            peaks["deep"].append(deep_peak)
            print(
                f"{size:>8} operations, {events} events: walk {walk_s:.2f} s "
                f"({events / walk_s:,.0f} events/s, peak {walk_peak / 2**20:.1f} MiB); "
                f"deep {deep_s:.2f} s ({events / deep_s:,.0f} events/s, "
                f"peak {deep_peak / 2**20:.1f} MiB); deep/walk time {deep_s / walk_s:.2f}"
            )
    for name, (small, large) in peaks.items():
        print(f"peak memory of the {name} at 4x the operations / at 1x: {large / small:.2f}")


if __name__ == "__main__":
    main()
