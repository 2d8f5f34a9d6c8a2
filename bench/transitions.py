"""Durable transitions per second through the services, against a bare sqlite3 loop.

    python -m bench.transitions [--pairs 2000] [--dir DIR]

Runs N dispatch+confirm pairs in process through ``Ledger`` on a fresh SQLite ledger with the
default durability (WAL, synchronous=FULL, one transaction per call) and a bare ``sqlite3``
loop that does the same row writes with the same pragmas, one transaction each, on the same
disk, taking turns in one run. Prints both rates and their ratio.
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

from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.migrate import init_ledger


class ThroughServices:
    """dispatch + confirm pairs through ``Ledger``, one transaction per call."""

    def __init__(self, path: Path) -> None:
        self.store, _ = init_ledger(str(path))
        self.ledger = Ledger(self.store)

    def pairs(self, lo: int, hi: int) -> float:
        start = time.perf_counter()
        for i in range(lo, hi):
            op = f"invoice:INV-{i}:send"
            self.ledger.dispatch(
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
            ).run("token:bench")
            self.ledger.confirm(op, f"R-{i}", execution_id=str(10_000 + i)).run("token:bench")
        return time.perf_counter() - start

    def close(self) -> None:
        self.store.dispose()


class BareLoop:
    """The same rows written with plain sqlite3: what the disk allows without the ledger."""

    def __init__(self, path: Path) -> None:
        init_ledger(str(path))[0].dispose()
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.seq, self.prev = 0, "0" * 64

    def event(self, kind: str, op: str, data: dict[str, object]) -> None:
        self.seq += 1
        at = datetime.now(UTC).replace(tzinfo=None).isoformat(sep=" ")
        body = json.dumps(data, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256((self.prev + body).encode()).hexdigest()
        self.conn.execute(
            "INSERT INTO events (seq, at, actor, kind, operation_id, data, prev_hash, hash) "
            "VALUES (?, ?, 'token:bench', ?, ?, ?, ?, ?)",
            (self.seq, at, kind, op, body, self.prev, digest),
        )
        self.conn.execute(
            "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1", (self.seq, digest)
        )
        self.prev = digest

    def pairs(self, lo: int, hi: int) -> float:
        conn = self.conn
        start = time.perf_counter()
        for i in range(lo, hi):
            op, now = f"invoice:INV-{i}:send", datetime.now(UTC).replace(tzinfo=None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                "INSERT INTO operations (operation_id, state, input_hash, processing_version,"
                " attempt, max_attempts, execution_id, run_index, version, created_at,"
                " updated_at) VALUES (?, 'dispatching', ?, 'v1', 1, 5, ?, 0, 1, ?, ?)",
                (op, "sha256:" + "a" * 64, str(i), now, now),
            )
            conn.execute(
                "INSERT INTO attempts (operation_id, number, execution_id, run_index, "
                "dispatched_at, outcome) VALUES (?, 1, ?, 0, ?, 'dispatching')",
                (op, str(i), now),
            )
            self.event("dispatched", op, {"attempt": 1})
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
                "INSERT INTO receipts (operation_id, attempt, receipt, confirmed_at, "
                "confirmed_by, kind) VALUES (?, 1, ?, ?, 'token:bench', 'workflow')",
                (op, f"R-{i}", now),
            )
            self.event("confirmed", op, {"receipt": f"R-{i}"})
            conn.execute("COMMIT")
        return time.perf_counter() - start

    def close(self) -> None:
        self.conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=8, help="alternations of the two loops")
    parser.add_argument("--dir", type=Path, default=Path("var"), help="where the files go")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="flowledger-bench-") as tmp:
        services, bare = ThroughServices(Path(tmp) / "ledger.db"), BareLoop(Path(tmp) / "bare.db")
        # The two loops take turns, so a change in the disk's speed during the run (another
        # process's fsyncs) falls on both alike.
        step = max(1, args.pairs // args.rounds)
        spent = {"services": 0.0, "bare": 0.0}
        for lo in range(0, args.pairs, step):
            hi = min(lo + step, args.pairs)
            spent["services"] += services.pairs(lo, hi)
            spent["bare"] += bare.pairs(lo, hi)
        services.close()
        bare.close()
    rate = {k: 2 * args.pairs / v for k, v in spent.items()}
    print(f"pairs:              {args.pairs} (dispatch + confirm, one transaction each)")
    print(f"through services:   {rate['services']:,.0f} durable transitions/s")
    print(f"bare sqlite3 loop:  {rate['bare']:,.0f} transactions/s (same rows, same pragmas)")
    print(f"ratio:              {rate['services'] / rate['bare']:.2f} (goal >= 0.6)")


if __name__ == "__main__":
    main()
