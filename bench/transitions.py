"""Durable transitions per second through the services, against a bare sqlite3 loop.

    python -m bench.transitions [--pairs 2000] [--dir DIR]

Runs N dispatch+confirm pairs in process through ``Ledger`` on a fresh SQLite ledger with the
default durability (WAL, synchronous=FULL, one transaction per call), then a bare ``sqlite3``
loop that does the same row writes with the same pragmas, one transaction each, on the same
disk, in the same run. Prints both rates and their ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from ledger.migrate import init_ledger
from ledger.services import DispatchInput, Ledger


def through_services(path: Path, pairs: int) -> float:
    store, _ = init_ledger(str(path))
    ledger = Ledger(store)
    start = time.perf_counter()
    for i in range(pairs):
        op = f"invoice:INV-{i}:send"
        ledger.dispatch(
            op,
            DispatchInput(
                processing_version="v1",
                execution_id=str(10_000 + i),
                input={"invoice": f"INV-{i}", "amount": i},
                has_input=True,
                run_index=0,
                workflow_id="wf-1",
                step="send",
            ),
            actor="token:bench",
        )
        ledger.confirm(op, f"R-{i}", execution_id=str(10_000 + i), actor="token:bench")
    elapsed = time.perf_counter() - start
    store.dispose()
    return 2 * pairs / elapsed


def bare_loop(path: Path, pairs: int) -> float:
    """The same rows written with plain sqlite3: what the disk allows without the ledger."""
    init_ledger(str(path))[0].dispose()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    seq, prev = 0, "0" * 64

    def event(kind: str, op: str, data: dict[str, object]) -> None:
        nonlocal seq, prev
        seq += 1
        at = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
        body = json.dumps(data, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256((prev + body).encode()).hexdigest()
        conn.execute(
            "INSERT INTO events (seq, at, actor, kind, operation_id, data, prev_hash, hash) "
            "VALUES (?, ?, 'token:bench', ?, ?, ?, ?, ?)",
            (seq, at, kind, op, body, prev, digest),
        )
        conn.execute("UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1", (seq, digest))
        prev = digest

    start = time.perf_counter()
    for i in range(pairs):
        op, now = f"invoice:INV-{i}:send", datetime.now(UTC).replace(tzinfo=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO operations (operation_id, state, input_hash, processing_version, "
            "attempt, max_attempts, execution_id, run_index, version, created_at, updated_at) "
            "VALUES (?, 'dispatching', ?, 'v1', 1, 5, ?, 0, 1, ?, ?)",
            (op, "sha256:" + "a" * 64, str(i), now, now),
        )
        conn.execute(
            "INSERT INTO attempts (operation_id, number, execution_id, run_index, "
            "dispatched_at, outcome) VALUES (?, 1, ?, 0, ?, 'dispatching')",
            (op, str(i), now),
        )
        event("dispatched", op, {"attempt": 1})
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE operations SET state = 'confirmed', receipt = ?, version = version + 1 "
            "WHERE operation_id = ?",
            (f"R-{i}", op),
        )
        conn.execute(
            "UPDATE attempts SET outcome = 'confirmed', ended_at = ? "
            "WHERE operation_id = ? AND number = 1",
            (now, op),
        )
        conn.execute(
            "INSERT INTO receipts (operation_id, attempt, receipt, confirmed_at, confirmed_by, "
            "kind) VALUES (?, 1, ?, ?, 'token:bench', 'workflow')",
            (op, f"R-{i}", now),
        )
        event("confirmed", op, {"receipt": f"R-{i}"})
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return 2 * pairs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (same disk)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="flowledger-bench-") as tmp:
        services = through_services(Path(tmp) / "ledger.db", args.pairs)
        bare = bare_loop(Path(tmp) / "bare.db", args.pairs)
    print(f"pairs:              {args.pairs} (dispatch + confirm, one transaction each)")
    print(f"through services:   {services:,.0f} durable transitions/s")
    print(f"bare sqlite3 loop:  {bare:,.0f} transactions/s (same rows, same pragmas)")
    print(f"ratio:              {services / bare:.2f} (goal >= 0.6)")


if __name__ == "__main__":
    main()
