"""What ``flowledger doctor`` reads of the database server or file itself: PostgreSQL's
version and autovacuum settings, SQLite's build and pragmas."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from flowledger.storage.engine import Store

SQLITE_VERSION = sqlite3.sqlite_version

_AUTOVACUUM_OFF_FOR = """
SELECT relname FROM pg_class
WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace
  AND 'autovacuum_enabled=false' = ANY(reloptions)
ORDER BY relname
"""


@dataclass(frozen=True)
class PostgresSettings:
    version: Any
    autovacuum: Any
    track_counts: Any
    autovacuum_off_for: list[str]  # the ledger's tables that turn autovacuum off


def postgres_settings(store: Store) -> PostgresSettings:
    with store.engine.connect() as conn:
        version = conn.exec_driver_sql("SHOW server_version").scalar()
        autovacuum = conn.exec_driver_sql("SHOW autovacuum").scalar()
        track_counts = conn.exec_driver_sql("SHOW track_counts").scalar()
        off_for = list(conn.exec_driver_sql(_AUTOVACUUM_OFF_FOR).scalars())
    return PostgresSettings(version, autovacuum, track_counts, off_for)


@dataclass(frozen=True)
class SqlitePragmas:
    journal_mode: Any
    synchronous: Any
    busy_timeout: Any
    foreign_keys: Any


def sqlite_pragmas(store: Store) -> SqlitePragmas:
    """The pragmas as a connection of the store's engine has them set."""
    with store.engine.connect() as conn:
        raw = conn.connection.driver_connection
        assert raw is not None
        journal = raw.execute("PRAGMA journal_mode").fetchone()[0]
        sync = raw.execute("PRAGMA synchronous").fetchone()[0]
        busy = raw.execute("PRAGMA busy_timeout").fetchone()[0]
        fks = raw.execute("PRAGMA foreign_keys").fetchone()[0]
    return SqlitePragmas(journal, sync, busy, fks)
