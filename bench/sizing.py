"""What the ledger's database weighs per guarded write, and in a year of them.

    python -m bench.sizing [--ops 20000] [--only sqlite|postgresql]

Fills a fresh ledger (a SQLite file, then a PostgreSQL database when
``FLOWLEDGER_BENCH_PG_URL`` or ``FLOWLEDGER_TEST_PG_URL`` names a server; ``VACUUM ANALYZE`` as
it grows, in case the server's autovacuum is off) through the services in the writer's
batches, shaped as the n8n node's calls are: each operation a dispatch (an n8n execution id,
workflow id, step and source) and a confirm with a mail provider's message id as its receipt;
one in a hundred reported ``unknown`` instead, held, and confirmed by a person with a note; a
sync's copy of each execution (the one that dispatched it, linked to its operation by an
event); the two Idempotency-Key rows a call pair leaves. Then measures each table with its
indexes (SQLite: ``dbstat`` after a checkpoint, and the file after ``VACUUM``; PostgreSQL:
``pg_total_relation_size`` after ``VACUUM``, and after ``VACUUM FULL``), and prints bytes per
operation and per event and a year of ``--per-day`` guarded writes (100,000): the tables kept
for good times the year's operations, plus the keys housekeeping keeps for their 24 hours.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.baselines import fresh_postgres
from flowledger.connectors.base import ExecutionRecord
from flowledger.domain import FailOutcome
from flowledger.services.ledger import DispatchInput, Ledger
from flowledger.storage.engine import Store
from flowledger.storage.migrate import init_ledger
from flowledger.sync import copies

T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
BATCH = 32  # units a commit, as the receiver's writer groups them under load
HELD_EVERY = 100  # one operation in a hundred has an unknown outcome, settled by a person
KEY_TTL = timedelta(hours=24)  # [receiver] idempotency_ttl: keys live this long
ACTOR = "token:n8n-prod"
SOURCE = "prod-n8n"
WORKFLOW = "Xk3J9aPq2LmN8rTs"  # n8n's workflow ids are 16 characters
# What grows with every operation and is never deleted, and what housekeeping prunes.
KEPT = ("operations", "attempts", "receipts", "holds", "events", "merkle_nodes", "executions")
PRUNED = ("idempotency_keys",)


class Clock:
    """Time moves on by ``step`` each time it is read: the day's writes spread over the day."""

    def __init__(self, step: timedelta) -> None:
        self.now, self.step = T0, step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


def op_id(i: int) -> str:
    return f"invoice:INV-2026-{i:07d}:send"


def execution(i: int) -> str:
    return str(4_200_000 + i)  # n8n's execution ids count up


def receipt(i: int) -> str:
    # An SES message id: the receipt a mail step gets back (about 60 characters).
    digest = hashlib.sha256(str(i).encode()).hexdigest()
    return f"0100018c{digest[:8]}-{digest[8:16]}-{digest[16:20]}-{digest[20:32]}-000000"


def dispatch_input(i: int) -> DispatchInput:
    return DispatchInput(
        processing_version="invoice-mailer@12",
        execution_id=execution(i),
        input={
            "invoice_id": f"INV-2026-{i:07d}",
            "amount": 1250.75,
            "currency": "EUR",
            "customer": {"id": f"C-{i % 9000}", "email": f"billing{i % 9000}@example.com"},
        },
        has_input=True,
        workflow_id=WORKFLOW,
        step="Send invoice",
        run_index=0,
        source=SOURCE,
    )


def fill(ledger: Ledger, ops: int) -> int:
    """``ops`` operations as the receiver writes them, their copies as a sync writes them;
    how many holds were opened. On PostgreSQL, ``VACUUM ANALYZE`` every twentieth of the way,
    as autovacuum would (the space the updates leave is reused, the plans see the sizes)."""
    every = max(BATCH, ops // 20 // BATCH * BATCH)
    for lo in range(0, ops, BATCH):
        if lo % every == 0:
            vacuum(ledger.store)
        batch = range(lo, min(ops, lo + BATCH))
        dispatches = [(ACTOR, ledger.dispatch(op_id(i), dispatch_input(i)).work) for i in batch]
        _all_done(ledger.run_many(dispatches))
        outcomes = [
            (
                ACTOR,
                ledger.fail(
                    op_id(i), FailOutcome.UNKNOWN, "timeout of 30000ms exceeded",
                    execution_id=execution(i),
                ).work
                if i % HELD_EVERY == HELD_EVERY - 1
                else ledger.confirm(op_id(i), receipt(i), execution_id=execution(i)).work,
            )
            for i in batch
        ]  # fmt: skip
        _all_done(ledger.run_many(outcomes))
    held = settle_holds(ledger)
    sync_copies(ledger, ops)
    vacuum(ledger.store)
    return held


def vacuum(store: Store) -> None:
    if store.dialect == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")


def _all_done(outcomes: list[Any]) -> None:
    for outcome in outcomes:
        assert outcome.error is None, outcome


def settle_holds(ledger: Ledger) -> int:
    with ledger.store.reader.connect() as conn:
        held = conn.execute(
            sa.text("SELECT id, operation_id FROM holds WHERE resolved_at IS NULL ORDER BY id")
        ).all()
    for hold_id, operation in held:
        number = int(operation.split("-")[-1].split(":")[0])
        ledger.resolve(
            hold_id,
            "confirm",
            note="found in the provider's sent log; the timeout came after the send",
            operator="ana.lima",
            receipt=receipt(number),
        ).run()
    return len(held)


def sync_copies(ledger: Ledger, ops: int, page: int = 250) -> None:
    """Each operation's execution as the n8n sync keeps it, a page a transaction."""
    for lo in range(0, ops, page):
        records = [
            ExecutionRecord(
                external_id=execution(i),
                status="success",
                final=True,
                workflow_id=WORKFLOW,
                workflow_name="Invoices: send approved invoices",
                mode="webhook",
                started_at=T0 + timedelta(seconds=i),
                stopped_at=T0 + timedelta(seconds=i, milliseconds=1840),
            )
            for i in range(lo, min(ops, lo + page))
        ]
        with ledger.transaction(f"sync:{SOURCE}") as tx:
            copies.store_records(tx, SOURCE, records, ledger.redact)


def idempotency_keys(store: Store, ops: int) -> None:
    """The two keys a dispatch and its confirm leave (the n8n node sends one with each call),
    with the answers stored under them."""
    table = sa.table(
        "idempotency_keys",
        *(
            sa.column(c)
            for c in (
                "token_id", "key", "request_hash", "status", "response_status",
                "response_body", "created_at", "expires_at",
            )
        ),
    )  # fmt: skip
    rows = []
    for i in range(ops):
        for call, answer in (
            ("dispatch", {"attempt": 1, "decision": "go", "reason": None, "receipt": None,
                          "state": "dispatching"}),
            ("confirm", {"attempt": 1, "decision": None, "reason": None,
                         "receipt": receipt(i), "state": "confirmed"}),
        ):  # fmt: skip
            material = f"{WORKFLOW}{execution(i)}{call}".encode()
            rows.append(
                {
                    "token_id": 1,
                    "key": f"n8n-{call}-{hashlib.sha256(material).hexdigest()[:48]}",
                    "request_hash": hashlib.sha256(material + b"body").hexdigest(),
                    "status": "completed",
                    "response_status": 200,
                    "response_body": json.dumps(
                        {"operation_id": op_id(i), **answer}, separators=(",", ":")
                    ),
                    "created_at": T0 + timedelta(seconds=i),
                    "expires_at": T0 + timedelta(seconds=i) + KEY_TTL,
                }
            )
    with store.engine.begin() as conn:
        for lo in range(0, len(rows), 5000):
            conn.execute(table.insert(), rows[lo : lo + 5000])


def counts(store: Store) -> dict[str, int]:
    with store.reader.connect() as conn:
        return {
            name: conn.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one()
            for name in (*KEPT, *PRUNED)
        }


def sqlite_sizes(path: Path) -> tuple[dict[str, int], int, int]:
    """Bytes per table with its indexes (``dbstat``), the file after a checkpoint, and after
    ``VACUUM``."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + size
        before = path.stat().st_size
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        after = path.stat().st_size
    finally:
        conn.close()
    return sizes, before, after


def postgres_sizes(store: Store, full: bool) -> tuple[dict[str, int], int]:
    """Bytes per table with its indexes and TOAST, and the whole database, after ``VACUUM``
    (``full``: ``VACUUM FULL``, the floor with no free space kept)."""
    with store.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("VACUUM FULL" if full else "VACUUM")
        rows = conn.exec_driver_sql(
            "SELECT relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).all()
        whole = conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
    return {name: int(size) for name, size in rows}, int(whole)


def report(label: str, sizes: dict[str, int], rows: dict[str, int], ops: int, per_day: int) -> None:
    print(f"\n{label}: {ops:,} operations, {rows['events']:,} events")
    print(f"  {'table':18} {'rows':>9} {'bytes':>12} {'a row':>7} {'an operation':>13}")
    for name in (*KEPT, *PRUNED):
        size = sizes.get(name, 0)
        print(
            f"  {name:18} {rows[name]:9,} {size:12,} {size / max(rows[name], 1):7.0f}"
            f" {size / ops:13.0f}"
        )
    kept = sum(sizes.get(name, 0) for name in KEPT)
    chain = sizes.get("events", 0) + sizes.get("merkle_nodes", 0)
    key_row = sizes.get("idempotency_keys", 0) / max(rows["idempotency_keys"], 1)
    year_ops = per_day * 365
    live_keys = 2 * per_day * KEY_TTL / timedelta(days=1)
    print(f"  kept for good: {kept / ops:,.0f} bytes an operation")
    print(f"  an event with its tree nodes: {chain / rows['events']:,.0f} bytes")
    year = kept / ops * year_ops / 1e9
    keys = key_row * live_keys / 1e6
    print(f"  a year of {per_day:,} a day ({year_ops:,} operations): {year:,.1f} GB kept for good")
    print(f"  plus the idempotency keys of the last 24 hours: {keys:,.0f} MB ({live_keys:,.0f})")


def filled(store: Store, ops: int, per_day: int) -> tuple[str, dict[str, int]]:
    """Fill ``store`` (:func:`fill`, :func:`idempotency_keys`): what it took, and the rows."""
    started = time.perf_counter()
    held = fill(Ledger(store, clock=Clock(timedelta(days=1) / per_day / 2)), ops)
    idempotency_keys(store, ops)
    return f"filled in {time.perf_counter() - started:.1f} s, {held} holds", counts(store)


def sqlite_round(ops: int, per_day: int, where: Path) -> None:
    path = where / "sizing.db"
    store, _ = init_ledger(str(path))
    try:
        took, rows = filled(store, ops, per_day)
    finally:
        store.dispose()
    sizes, before, after = sqlite_sizes(path)
    print(f"\nSQLite: {took}")
    print(f"  file after a checkpoint {before:,} bytes, after VACUUM {after:,}")
    report("SQLite (dbstat)", sizes, rows, ops, per_day)


def postgres_round(ops: int, per_day: int, server: str) -> None:
    with fresh_postgres(server) as url:
        store, _ = init_ledger(url)
        try:
            took, rows = filled(store, ops, per_day)
            print(f"\nPostgreSQL: {took}")
            for full in (False, True):
                sizes, whole = postgres_sizes(store, full)
                name = "VACUUM FULL" if full else "VACUUM"
                print(f"  database after {name}: {whole:,} bytes")
                report(f"PostgreSQL after {name}", sizes, rows, ops, per_day)
        finally:
            store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000, help="operations to write")
    parser.add_argument("--per-day", type=int, default=100_000, help="guarded writes a day")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    parser.add_argument("--dir", type=Path, help="where the SQLite file goes (a temporary one)")
    args = parser.parse_args()
    if args.only != "postgresql":
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            sqlite_round(args.ops, args.per_day, Path(tmp))
    if args.only != "sqlite":
        server = os.environ.get("FLOWLEDGER_BENCH_PG_URL") or os.environ.get(
            "FLOWLEDGER_TEST_PG_URL"
        )
        if server:
            postgres_round(args.ops, args.per_day, server)
        else:
            print("\nPostgreSQL: skipped (set FLOWLEDGER_BENCH_PG_URL)")


if __name__ == "__main__":
    main()
