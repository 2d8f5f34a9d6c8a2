"""What one durable commit per row allows on this disk and server, the figure the receivers are
set against; and the fresh PostgreSQL databases the benchmarks run in."""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa


def bare_sqlite_rate(directory: Path, rows: int) -> float:
    """Rows per second, one INSERT + COMMIT each, durable (WAL + synchronous=FULL)."""
    path = directory / f"bare-{time.monotonic_ns()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, state TEXT, data TEXT)")
    started = time.perf_counter()
    for i in range(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, 'dispatching', ?)", (f"op-{i}", "x" * 200))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return rows / elapsed


def bare_postgres_rate(url: str, rows: int, table: str = "bare") -> float:
    """Rows per second into PostgreSQL, one INSERT + COMMIT each (synchronous_commit on)."""
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE TABLE {table} (id TEXT PRIMARY KEY, state TEXT, data TEXT)"
            )
            conn.commit()
            started = time.perf_counter()
            for i in range(rows):
                conn.exec_driver_sql(
                    f"INSERT INTO {table} VALUES (%s, 'dispatching', %s)", (f"op-{i}", "x" * 200)
                )
                conn.commit()
            return rows / (time.perf_counter() - started)
    finally:
        engine.dispose()


@contextlib.contextmanager
def fresh_postgres(server: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped afterwards."""
    name = f"fl_bench_{uuid.uuid4().hex[:8]}"
    admin_url = sa.make_url(server).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
