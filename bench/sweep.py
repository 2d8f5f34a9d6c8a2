"""How long one sweep takes over a large ledger, and whether its queries use the indexes.

``python -m bench.sweep [--scale 10] [--ops N] [--due N]``: a fresh ledger of 1,000,000
operations (``--scale 10``: 10,000,000, a few GB of disk and several minutes to fill each
database; bulk inserted with raw SQL on SQLite, COPY on PostgreSQL) of which 10,000
(``--scale 10``: 100,000) are due for a hold
(unknown outcome, stale prepared, failed execution), plus as many running executions and
holds that are not due. Prints the first sweep's time (it opens every due hold), a second
sweep's (it opens none), the query plans of every statement the sweep ran, and a baseline:
the same kind of holds opened one transaction each through ``Ledger.open_hold``. PostgreSQL
runs when ``FLOWLEDGER_BENCH_PG_URL`` or ``FLOWLEDGER_TEST_PG_URL`` names a server. Goals:
a first sweep within 2 s at 1,000,000 operations and 5 s at 10,000,000.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from flowledger.config import SweepConfig
from flowledger.domain.staleness import stale_prepared_hold
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import chain

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
HASH = "sha256:" + "a" * 64
OP_COLUMNS = (
    "operation_id, state, input_hash, processing_version, attempt, max_attempts, "
    "execution_id, deadline, version, created_at, updated_at"
)


def split(due: int) -> tuple[int, int, int]:
    """Index bounds: [0, a) unknown outcome, [a, b) stale prepared, [b, due) failed execution;
    [due, 3 * due) dispatching within their deadline, their executions running."""
    a = due * 6 // 10
    b = a + due * 3 // 10
    return a, b, 3 * due


def operations(total: int, due: int) -> Iterator[tuple[Any, ...]]:
    long_ago = NOW - timedelta(days=3)
    soon = NOW + timedelta(minutes=10)
    a, b, busy = split(due)
    for n in range(total):
        op = f"op:{n:08d}"
        if n < a:
            yield op, "dispatching", HASH, "v1", 1, 5, f"ex-{n}", long_ago, 1, long_ago, long_ago
        elif n < b:
            yield op, "prepared", HASH, "v1", 0, 5, None, None, 1, long_ago, long_ago
        elif n < busy:
            yield op, "dispatching", HASH, "v1", 1, 5, f"ex-{n}", soon, 1, NOW, NOW
        elif n % 50 == 0:
            yield op, "prepared", HASH, "v1", 0, 5, None, None, 1, NOW, NOW  # fresh
        else:
            yield op, "confirmed", HASH, "v1", 1, 5, f"ex-{n}", long_ago, 2, long_ago, long_ago


def executions(total: int, due: int) -> Iterator[tuple[Any, ...]]:
    _, b, busy = split(due)
    for n in range(b, busy):
        status = "error" if n < due else "running"
        yield "prod", f"ex-{n}", status, status != "running", NOW, NOW, NOW


EXEC_COLUMNS = "source, external_id, status, final, started_at, first_seen_at, last_seen_at"


def _stored(moment: datetime) -> str:
    """A time as the ledger stores it on SQLite (naive UTC, always with microseconds): the
    sweep compares stored times as text, so a shorter form would sort before its equal."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", timespec="microseconds")


def fill_sqlite(store: Store, total: int, due: int) -> None:
    def naive(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        for r in rows:
            yield tuple(_stored(v) if isinstance(v, datetime) else v for v in r)

    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        raw.execute("BEGIN IMMEDIATE")
        raw.executemany(
            f"INSERT INTO operations ({OP_COLUMNS}) VALUES ({', '.join('?' * 11)})",
            naive(operations(total, due)),
        )
        raw.executemany(
            f"INSERT INTO executions ({EXEC_COLUMNS}) VALUES ({', '.join('?' * 7)})",
            naive(executions(total, due)),
        )
        raw.execute("COMMIT")
        raw.execute("ANALYZE")
        # The fill is one transaction, and on a build with the WAL-reset bug no connection
        # checkpoints on its own: without this the sweep read a 10x ledger through a WAL of
        # several GB, which a running ledger never has (it checkpoints every
        # CHECKPOINT_EVERY commits).
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def fill_postgres(store: Store, total: int, due: int) -> None:
    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        with raw.cursor() as cur:
            with cur.copy(f"COPY operations ({OP_COLUMNS}) FROM STDIN") as copy:
                for row in operations(total, due):
                    copy.write_row(row)
            with cur.copy(f"COPY executions ({EXEC_COLUMNS}) FROM STDIN") as copy:
                for row in executions(total, due):
                    copy.write_row(row)
        raw.commit()
        raw.autocommit = True
        raw.execute("VACUUM ANALYZE operations")
        raw.execute("VACUUM ANALYZE executions")
        # As SQLite's checkpoint above: the fill leaves several GB of WAL for the server to
        # write back, which it did during the timed sweep otherwise (a running ledger's
        # checkpoints spread a day's writes, not one COPY of 10,000,000 rows).
        raw.execute("CHECKPOINT")
        raw.autocommit = False


class Recorder:
    """Keeps each distinct SELECT the sweep sends, with its parameters, for EXPLAIN."""

    def __init__(self, engine: sa.Engine) -> None:
        self.statements: dict[str, Any] = {}
        sa.event.listen(engine, "before_cursor_execute", self.seen)

    def seen(self, conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        flat = " ".join(statement.split())
        lookup = "FROM holds WHERE holds.cause_key IN"  # the unique-key check, not a rule
        if flat.upper().startswith("SELECT") and lookup not in flat:
            self.statements.setdefault(statement, params)


def verify(store: Store, after: str) -> None:
    """Print what ``verify`` says of the chain, and stop the bench if it does not hold."""
    with store.reader.connect() as conn:
        checked = chain.verify(conn)
    print(f"verify: {'ok' if checked.ok else 'BROKEN'}, {checked.checked:,} events checked")
    if not checked.ok:
        raise SystemExit(f"the chain does not hold after {after}: {checked}")


def explain(store: Store, statements: dict[str, Any]) -> None:
    with store.engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        for sql, params in statements.items():
            first = " ".join(sql.split())[:110]
            print(f"  -- {first}...")
            if store.dialect == "sqlite":
                rows = raw.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
                for r in rows:
                    print(f"     {r[-1][:150]}")
            else:
                with raw.cursor() as cur:
                    cur.execute("EXPLAIN " + sql, params)
                    for (line,) in cur.fetchall():
                        print(f"     {line[:150]}")
        conn.rollback()


def bench(name: str, db: str, total: int, due: int, goal: float) -> None:
    store, _ = init_ledger(db)
    try:
        t = time.perf_counter()
        (fill_sqlite if store.dialect == "sqlite" else fill_postgres)(store, total, due)
        filled = time.perf_counter() - t
        # The fill's writes reach the disk before the timed sweep, which would pay for them in
        # its commits otherwise (bench/README.md, "Sweep").
        os.sync()
        print(
            f"\n== {name}: {total:,} operations, {due:,} due (filled in {filled:.1f} s)",
            flush=True,
        )
        ledger = Ledger(store, clock=lambda: NOW)
        sweep = Sweep(ledger, SweepConfig())
        recorder = Recorder(store.engine)
        # The import heap's first full collection is not the sweep's: `flowledger run` collects
        # and freezes it before it serves, and where it fell otherwise depended on the imports.
        gc.collect()
        t = time.perf_counter()
        first = sweep.run()
        first_s = time.perf_counter() - t
        t = time.perf_counter()
        second = sweep.run()
        second_s = time.perf_counter() - t
        sa.event.remove(store.engine, "before_cursor_execute", recorder.seen)
        print(f"first sweep:  {first_s:.3f} s, opened {first.total:,} holds {first.opened}")
        rules = ", ".join(f"{k} {v:.2f} s" for k, v in first.seconds.items() if v >= 0.005)
        print(f"  by rule: {rules}")
        print(f"second sweep: {second_s:.3f} s, opened {second.total:,} holds")
        sample = 1000
        t = time.perf_counter()
        for n in range(sample):
            ledger.open_hold(stale_prepared_hold(f"baseline-{n}", 0, NOW)).run("bench")
        one_by_one = (time.perf_counter() - t) / sample
        per_hold = first_s / max(first.total, 1)
        print(
            f"baseline: one transaction per hold (Ledger.open_hold, {sample} holds) "
            f"{one_by_one * 1e3:.2f} ms/hold; the sweep {per_hold * 1e3:.3f} ms/hold "
            f"({one_by_one / per_hold:.1f}x faster); goal <= {goal:g} s for the first sweep: "
            f"{'met' if first_s <= goal else 'NOT met'}"
        )
        print("query plans of the sweep's reads:")
        explain(store, recorder.statements)
        verify(store, "the sweeps")
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale", type=int, default=1, help="10: ten times the operations and the due ones"
    )
    parser.add_argument("--ops", type=int, help="operations (default 1,000,000 x scale)")
    parser.add_argument("--due", type=int, help="due operations (default 10,000 x scale)")
    parser.add_argument("--only", choices=["sqlite", "postgresql"], help="one database only")
    args = parser.parse_args()
    ops = args.ops or 1_000_000 * args.scale
    due = args.due or 10_000 * args.scale
    goal = 2.0 if ops <= 1_000_000 else 5.0
    if args.only != "postgresql":
        with tempfile.TemporaryDirectory() as tmp:
            bench("SQLite", str(Path(tmp) / "bench.db"), ops, due, goal)
    if args.only == "sqlite":
        return
    pg = os.environ.get("FLOWLEDGER_BENCH_PG_URL") or os.environ.get("FLOWLEDGER_TEST_PG_URL")
    if not pg:
        print("\nPostgreSQL: set FLOWLEDGER_BENCH_PG_URL to run it")
        return
    name = f"fl_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(
        sa.make_url(pg).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        url = sa.make_url(pg).set(database=name).render_as_string(hide_password=False)
        bench("PostgreSQL", url, ops, due, goal)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


if __name__ == "__main__":
    main()
