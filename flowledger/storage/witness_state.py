"""A witness's own state (``flowledger witness serve``): for each log it witnesses, the latest
checkpoint it cosigned. A small SQLite file of its own, on the witness's machine, never the
ledger's database.

An update is a compare-and-swap inside one ``BEGIN IMMEDIATE`` transaction: the latest
checkpoint is read, the new one checked against it, and written only where the row still
holds the size it was checked against, so two requests at once can never roll the witness
back (the race tlog-witness describes). The cosignature is made inside the transaction and
stored with the checkpoint, so the witness has persisted what it answers before it answers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from flowledger.domain.checkpoints import Checkpoint
from flowledger.plumbing.faults import crashpoint
from flowledger.storage.problems import LedgerError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS witnessed (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL,       -- the checkpoint with the log's signatures and this cosignature
    updated_at TEXT NOT NULL
)
"""
# What `flowledger witness forget` took off, kept as the evidence it is.
_FORGOTTEN = """
CREATE TABLE IF NOT EXISTS forgotten (
    origin TEXT NOT NULL,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL,
    forgotten_at TEXT NOT NULL
)
"""
BUSY_MS = 10_000


@dataclass(frozen=True)
class Held:
    """The latest checkpoint of a log the witness cosigned."""

    checkpoint: Checkpoint
    note: str
    updated_at: str


# Given the latest checkpoint cosigned (or None), the checkpoint to store and its note.
Decide = Callable[[Checkpoint | None], tuple[Checkpoint, str]]


class WitnessState:
    """The state file at ``path``; made on first use (owner-only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.touch(mode=0o600, exist_ok=True)
            with closing(self._connect()) as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(_SCHEMA)
                conn.execute(_FORGOTTEN)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open the witness state {path}: {exc}") from None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def advance(self, origin: str, decide: Decide) -> str:
        """Run ``decide`` on the latest checkpoint of ``origin`` and store what it returns,
        in one transaction; its exception rolls back and propagates. The stored note."""
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT size, root FROM witnessed WHERE origin = ?", (origin,)
                ).fetchone()
                latest = Checkpoint(origin, row[0], bytes(row[1])) if row else None
                cp, note = decide(latest)
                now = datetime.now(UTC).isoformat()
                if latest is None:
                    conn.execute(
                        "INSERT INTO witnessed (origin, size, root, note, updated_at) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (origin, cp.size, cp.root, note, now),
                    )
                else:
                    cur = conn.execute(
                        "UPDATE witnessed SET size = ?, root = ?, note = ?, updated_at = ? "
                        "WHERE origin = ? AND size = ? AND root = ?",
                        (cp.size, cp.root, note, now, origin, latest.size, latest.root),
                    )
                    assert cur.rowcount == 1, "the witnessed row changed under its lock"
                crashpoint("witness_before_commit")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        crashpoint("witness_after_commit")  # stored, not yet answered
        return note

    def latest(self, origin: str) -> str | None:
        """The note last cosigned for ``origin``: the log's signatures and this witness's."""
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT note FROM witnessed WHERE origin = ?", (origin,)).fetchone()
        return None if row is None else str(row[0])

    def held(self, origin: str) -> Held | None:
        """What the witness holds of ``origin``, if anything."""
        with closing(self._connect()) as conn:
            row = conn.execute(
                "SELECT size, root, note, updated_at FROM witnessed WHERE origin = ?", (origin,)
            ).fetchone()
        if row is None:
            return None
        return Held(Checkpoint(origin, row[0], bytes(row[1])), str(row[2]), str(row[3]))

    def forget(self, held: Held) -> bool:
        """Take ``held`` off, so that the next checkpoint of its log is taken as a first one;
        it is kept in the ``forgotten`` table. ``False`` when the witness has cosigned another
        checkpoint of the log since ``held`` was read (nothing is changed)."""
        cp = held.checkpoint
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(
                    "DELETE FROM witnessed WHERE origin = ? AND size = ? AND root = ?",
                    (cp.origin, cp.size, cp.root),
                )
                if cur.rowcount == 1:
                    conn.execute(
                        "INSERT INTO forgotten (origin, size, root, note, forgotten_at) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (cp.origin, cp.size, cp.root, held.note, datetime.now(UTC).isoformat()),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return cur.rowcount == 1
