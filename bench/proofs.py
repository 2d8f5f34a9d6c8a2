"""What the Merkle tree costs: its share of the writer's CPU per appended event, and
``checkpoint`` and ``proof`` on a large ledger.

``python -m bench.proofs [--ops N] [--events M]``:

1. A fresh SQLite ledger written through the services (dispatch, then confirm, in group
   commits of 1 and of 50 units): the CPU time (``time.process_time``) spent in the tree's
   append (:func:`flowledger.storage.merkle.extend`, timed by a wrapper) against the CPU time
   of the whole run, per event. CPU time, not wall time: the figure holds on a loaded machine.
   On PostgreSQL the same work is a trigger in the server, not the receiver's CPU.
2. A SQLite ledger of M events (default 1,000,000) built by bulk inserts: every event sealed
   into the chain and every perfect subtree made by the functions the append path uses
   (:func:`flowledger.domain.merkle.append`), so the tree is the one appends would have left.
   Then the wall time of signing a checkpoint, of one operation's proof file, of a consistency
   proof, and of ``flowledger checkpoint`` / ``proof`` as commands (a new process each, so
   Python's start-up and imports included).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.verify import request
from flowledger.domain import merkle
from flowledger.domain.chain import event_body
from flowledger.domain.hashing import canonical_json, chain_hash
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage import merkle as tree
from flowledger.storage.engine import Store, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.reads.chain import head
from flowledger.storage.reads.meta import identity

EVENTS_PER_OP = 4  # in the large ledger: each operation has this many events


def append_cost(ops: int, batch: int, where: Path) -> tuple[int, float, float]:
    """Events written, CPU seconds in the tree's append, CPU seconds of the whole run."""
    store, _ = init_ledger(str(where))
    ledger = Ledger(store)
    spent = [0.0]
    real = tree.extend

    def timed(tx: Any, events: Any) -> None:
        started = time.process_time()
        real(tx, events)
        spent[0] += time.process_time() - started

    tree.extend = timed
    try:
        started = time.process_time()
        for start in range(0, ops, batch):
            ids = [f"op:{n:08d}" for n in range(start, min(ops, start + batch))]
            ledger.run_many([("token:bench", ledger.dispatch(i, request(i)).work) for i in ids])
            ledger.run_many([("token:bench", ledger.confirm(i, f"R-{i}").work) for i in ids])
        total = time.process_time() - started
    finally:
        tree.extend = real
    with store.reader.connect() as conn:
        events = head(conn)[0]
    store.dispose()
    return events, spent[0], total


def pg_trigger_cost(url: str, appends: int = 400) -> tuple[float, float]:
    """PostgreSQL: the median server time of the tree's trigger, and of the whole statement,
    for single-event appends (``EXPLAIN ANALYZE``), in a database made for it and dropped."""
    admin = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    admin = admin.execution_options(isolation_level="AUTOCOMMIT")
    name = f"fl_bench_tree_{os.getpid()}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        store, _ = init_ledger(str(sa.make_url(url).set(database=name).render_as_string(False)))
        trigger, statement = [], []
        with store.engine.connect() as conn:
            for seq in range(1, appends + 1):
                plan = "\n".join(
                    conn.exec_driver_sql(
                        "EXPLAIN (ANALYZE) INSERT INTO events (seq, at, actor, kind, data,"
                        " prev_hash, hash) VALUES (%(seq)s, now(), 'bench', 'note', '{}', '',"
                        " md5(%(text)s) || md5(%(text)s || 'x'))",
                        {"seq": seq, "text": str(seq)},
                    ).scalars()
                )
                conn.commit()
                trigger.append(float(_ms(plan, r"Trigger events_merkle_append: time=([\d.]+)")))
                statement.append(float(_ms(plan, r"Execution Time: ([\d.]+) ms")))
        store.dispose()
        return statistics.median(trigger) / 1e3, statistics.median(statement) / 1e3
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _ms(plan: str, pattern: str) -> str:
    found = re.search(pattern, plan)
    assert found is not None, plan
    return found.group(1)


def build_large(path: Path, events: int) -> None:
    """A ledger of ``events`` events, chained and with its tree, by bulk inserts."""
    store, _ = init_ledger(str(path))
    with store.reader.connect() as conn:
        prev = identity(conn)[1]
    at = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    time_of_events = "2026-11-02 09:00:00.000000"
    edge: list[bytes] = []
    with store.engine.begin() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        rows: list[tuple[Any, ...]] = []
        nodes: list[tuple[int, int, bytes]] = []
        for seq in range(1, events + 1):
            op = f"op:{(seq - 1) // EVENTS_PER_OP:08d}"
            data = {"n": seq}
            digest = chain_hash(prev, event_body(seq, at, "token:bench", "note", op, None, data))
            rows.append((seq, time_of_events, "token:bench", "note", op, None,
                         canonical_json(data).decode(), prev, digest))  # fmt: skip
            made = merkle.append(edge, seq - 1, merkle.event_leaf(digest))
            nodes.extend(node for node in made if node[0])  # leaves are the events' hashes
            prev = digest
            if len(rows) >= 50_000 or seq == events:
                raw.executemany(
                    "INSERT INTO events (seq, at, actor, kind, operation_id, hold_id, data,"
                    " prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                raw.executemany("INSERT INTO merkle_nodes VALUES (?, ?, ?)", nodes)
                rows, nodes = [], []
        raw.execute("UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1", (events, prev))
    store.dispose()


def best_and_median(fn: Callable[[], Any], runs: int = 7) -> tuple[float, float, float]:
    """Wall seconds, best and median, and the median CPU seconds of this process."""
    seconds, cpu = [], []
    for _ in range(runs):
        started, used = time.perf_counter(), time.process_time()
        fn()
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return min(seconds), statistics.median(seconds), statistics.median(cpu)


def command(args: list[str], env: dict[str, str], runs: int = 3) -> tuple[float, float, float]:
    """Wall seconds, best and median, of the command in a new process; its mean CPU seconds."""

    def run() -> None:
        subprocess.run(
            [sys.executable, "-m", "flowledger.cli", *args],
            env=env,
            check=True,
            capture_output=True,
        )

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    best, median, _ = best_and_median(run, runs=runs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / runs
    return best, median, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="build the large ledger here and keep it")
    parser.add_argument("--pg", metavar="URL", help="also time the trigger on this PostgreSQL")
    args = parser.parse_args()
    if args.pg:
        trigger, statement = pg_trigger_cost(args.pg)
        print(
            f"PostgreSQL, single-event appends (server time, median of 400): the tree's trigger"
            f" {trigger * 1e6:.0f} µs of {statement * 1e6:.0f} µs for the INSERT statement"
        )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"tree append, {args.ops} operations (dispatch + confirm), SQLite, CPU time:")
        for batch in (1, 50):
            events, spent, total = append_cost(args.ops, batch, work / f"append-{batch}.db")
            print(
                f"  group commits of {batch:>2}: {events} events, tree {spent / events * 1e6:.1f}"
                f" µs/event of {total / events * 1e6:.1f} µs/event in all"
                f" ({spent / total * 100:.2f} % of the writer's CPU)"
            )
        big = args.keep or work / "large.db"
        if not big.exists():
            started = time.perf_counter()
            build_large(big, args.events)
            print(f"built {args.events} events in {time.perf_counter() - started:.0f} s")
        store: Store = open_store(str(big))
        signer = create_key(work / "checkpoint.key", proofs.ledger_origin(store))
        note = proofs.signed_checkpoint(store, signer)
        size = args.events
        op = f"op:{(size // 2) // EVENTS_PER_OP:08d}"
        old = proofs.signed_checkpoint(store, signer)
        figures = {
            "checkpoint (sign the tree head)": lambda: proofs.signed_checkpoint(store, signer),
            f"proof of {op} ({EVENTS_PER_OP} events)": lambda: proofs.operation_proof(
                store, op, note
            ),
            "root at a past size": lambda: _root(store, size // 3),
            "consistency proof": lambda: proofs.consistency_proof(store, old, note),
        }
        print(f"on {size} events (wall time best, median; CPU time median; of 7):")
        for name, fn in figures.items():
            best, median, cpu = best_and_median(fn)
            print(f"  {name:<40} {best * 1e3:8.1f} ms {median * 1e3:8.1f} ms {cpu * 1e3:8.1f} ms")
        store.dispose()
        config = work / "flowledger.toml"
        config.write_text(f'[checkpoints]\nkey = "{work / "checkpoint.key"}"\n')
        env = {**os.environ, "FLOWLEDGER_CONFIG": str(config), "FLOWLEDGER_DB": str(big)}
        print("as commands (a new process each; wall time best, median; CPU time mean; of 3):")
        for name, argv in (
            ("flowledger checkpoint", ["checkpoint"]),
            (f"flowledger proof {op}", ["proof", op]),
            ("flowledger --version (start-up alone)", ["--version"]),
        ):
            best, median, cpu = command(argv, env)
            print(f"  {name:<40} {best * 1e3:8.1f} ms {median * 1e3:8.1f} ms {cpu * 1e3:8.1f} ms")


def _root(store: Store, size: int) -> bytes:
    with store.reader.connect() as conn:
        return tree.root(conn, size)


if __name__ == "__main__":
    main()
