"""One write transaction on the driver's connection, and the plain SQL it runs.

The hot path (dispatch, confirm, fail) runs a handful of short statements per call, spoken to
the driver's cursor inside the transaction SQLAlchemy opened (:mod:`flowledger.storage.sql`);
on PostgreSQL they are queued in psycopg's pipeline and waited for only where a result is read.
The repositories speak to it; a service's work sees it as
:class:`~flowledger.storage.transaction.SqlTx` (the repositories' statements as its methods),
through the services' port (:mod:`flowledger.services.port`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa

from flowledger.plumbing.metrics import DB_ROUND_TRIPS
from flowledger.storage.engine import ChainHint
from flowledger.storage.models import time_binder
from flowledger.storage.sql import Row, bound, pyformat, row_type
from flowledger.storage.sql import together as joined

_NOTHING = contextlib.nullcontext()  # Tx.together on SQLite


class Conflict(Exception):
    """Another writer changed the row between our read and our write: run again."""


class PendingEvent(NamedTuple):
    """An event recorded in a transaction, sealed into the chain just before its commit (a
    named tuple: one is made per event, and it is the cheapest to make)."""

    at: datetime
    actor: str
    kind: str
    operation_id: str | None
    hold_id: int | None
    data: dict[str, Any]


class Tx:
    """One write transaction: the connection, the time it runs at, who acts, and the events
    to append just before commit."""

    def __init__(
        self,
        engine: sa.Engine,
        pooled: Any,
        now: datetime,
        actor: str,
        chain_hint: ChainHint | None = None,
    ) -> None:
        self.engine = engine
        self.chain_hint = chain_hint or ChainHint()
        self.now = now
        self.actor = actor
        self.dialect = engine.dialect.name
        self._pooled = pooled
        self._cursor = pooled.driver_connection.cursor()
        self._conn: sa.Connection | None = None
        self.events: list[PendingEvent] = []
        self._bind_time = time_binder(engine.dialect)
        self._times: dict[tuple[datetime, Any], Any] = {}
        self.db_now = self._bind_time(now)  # ``now`` as bound to a statement
        self._pipeline: Any = None  # psycopg's pipeline while statements are queued
        self._pipe: Any = None  # the pipeline itself (what entering ``_pipeline`` gave)
        self._expected: list[tuple[Any, type[Exception]]] = []
        self.round_trips = 0  # PostgreSQL only: exchanges this transaction waited for
        self.savepoint_held = False  # a unit of run_many left its savepoint for the next
        # Statements that may have changed something (all but a plain SELECT; any use of
        # :attr:`conn`): a unit of run_many that raised before any is refused alone.
        self.writes = 0
        # A guard's verdict to read before the next write goes out (:meth:`gate`), and how
        # many waits the transaction had made when it was set.
        self._gate: Callable[[], None] | None = None
        self._gate_waits = 0
        # Operations read for the units of a batch ahead of them, with their open holds
        # (:func:`flowledger.storage.operations.read_ahead`).
        self.read_ahead: dict[str, list[Row]] = {}
        self._together: list[tuple[str, dict[str, Any], type[Exception] | None]] | None = None

    @property
    def conn(self) -> sa.Connection:
        """SQLAlchemy's view of this same transaction, for statements built with Core (which
        reads each result as soon as it runs: the pipeline, if any, is left first)."""
        self._before_write()
        self.writes += 1  # what it runs is not seen here: count it as a write
        self.settle()
        if self._conn is None:
            self._conn = sa.Connection(self.engine, connection=self._pooled).execution_options(
                flowledger_begun=True
            )
        return self._conn

    def begin(self) -> None:
        if self.dialect == "sqlite":
            # Take the write lock now, so a read-then-write never fails half-way with BUSY.
            self._cursor.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        if self._pipeline is not None and self._expected:
            # A compare-and-set still to be checked is checked first: a lost one must roll
            # the transaction back, not be found after its COMMIT.
            self.settle()
        if self._pipeline is not None:
            # The COMMIT goes out with what is queued (the events' append): one round trip.
            self.execute("COMMIT")
            self.settle()
            return
        self.round_trips += 1
        self._pooled.commit()

    # ------------------------------------------------------------------ gate

    def gate(self, verdict: Callable[[], None] | None) -> None:
        """Read ``verdict`` (a guard's, which raises to refuse) before the next write goes
        out, so that a refused unit has written nothing and can be refused alone, with no
        savepoint to roll back to. On PostgreSQL the guard's statement is waited for by then
        when a read came in between (as a dispatch's or a confirm's read of its operation
        does), else the pipeline is synced for it (a round trip)."""
        self._gate, self._gate_waits = verdict, self.round_trips

    def open_gate(self) -> bool:
        """Read the verdict left by :meth:`gate` now, if it is still to be read (raising its
        refusal); whether there was one."""
        verdict, self._gate = self._gate, None
        if verdict is None:
            return False
        if self._pipeline is not None and self.round_trips == self._gate_waits:
            self.round_trips += 1
            self._pipe.sync()  # the guard's statement not yet waited for
        verdict()
        return True

    def gate_pending(self) -> bool:
        """A verdict left by :meth:`gate` is still to be read."""
        return self._gate is not None

    def _before_write(self) -> None:
        if self._gate is not None:
            self.open_gate()

    # ------------------------------------------------------------------ pipeline

    def pipeline(self) -> None:
        """PostgreSQL: queue the statements that follow instead of waiting for each, until a
        result is read or :meth:`settle` (psycopg's pipeline mode). A no-op on SQLite, where
        a statement is a call into the process, not a round trip."""
        if self.dialect != "sqlite" and self._pipeline is None:
            self._pipeline = self._pooled.driver_connection.pipeline()
            self._pipe = self._pipeline.__enter__()

    def settle(self) -> None:
        """Wait for every queued statement (one round trip), raising the first one's error,
        then make the checks :meth:`expect_one` deferred. Leaves the pipeline."""
        pipe, self._pipeline = self._pipeline, None
        if pipe is not None:
            self.round_trips += 1
            pipe.__exit__(None, None, None)
        expected, self._expected = self._expected, []
        missed = [error for cursor, error in expected if cursor.rowcount != 1]
        for cursor, _ in expected:
            cursor.close()
        if missed:
            raise missed[0]()

    def abandon(self) -> None:
        """Leave the pipeline after an error, dropping what it still had to say: the caller
        rolls back what the statements did."""
        expected, self._expected = self._expected, []
        pipe, self._pipeline = self._pipeline, None
        if pipe is not None:
            # The error is the caller's already, or one it caused: it rolls back.
            with contextlib.suppress(Exception):
                pipe.__exit__(None, None, None)
        for cursor, _ in expected:
            cursor.close()

    def rollback(self) -> None:
        self.chain_hint.seq = None  # whatever this transaction appended is not there
        self.abandon()
        try:
            self._pooled.rollback()
        except Exception:  # the connection died with the transaction: never reuse it
            if self._pooled.dbapi_connection is not None:  # SQLAlchemy may have dropped it
                self._pooled.invalidate()

    def close(self) -> None:
        """Return the connection to the pool (the SQLAlchemy view is dropped, not closed:
        the transaction is already ended on the driver)."""
        self._conn = None
        if self.round_trips:
            DB_ROUND_TRIPS.inc(self.round_trips)
        with contextlib.suppress(Exception):  # a cursor of a connection that was dropped
            self._cursor.close()
        self._pooled.close()

    # ------------------------------------------------------------------ SQL

    def together(self) -> contextlib.AbstractContextManager[None]:
        """PostgreSQL: the writes made in the block go out as ONE statement when it ends,
        each but one as a data-modifying ``WITH`` clause of the one that is a compare-and-set
        (:meth:`expect_one`, at most one), or else of the last. Only for writes no other
        write of the block depends on, each on rows none of the others touches (the clauses
        of one statement see the same snapshot, not each other's changes; the foreign keys
        are checked at its end); no reads in the block. On SQLite, or in a block already, one
        shared empty context. A statement in a pipeline is a send of its own and a wake-up of
        the server (``bench/README.md``, "Write path")."""
        if self.dialect == "sqlite" or self._together is not None:
            return _NOTHING
        return self._joined()

    @contextlib.contextmanager
    def _joined(self) -> Iterator[None]:
        self._together = []
        try:
            yield
        finally:
            group, self._together = self._together, None
        if group:
            self._send_together(group)

    def _send_together(
        self, group: list[tuple[str, dict[str, Any], type[Exception] | None]]
    ) -> None:
        checked = [i for i, (_, _, error) in enumerate(group) if error is not None]
        assert len(checked) <= 1, "one compare-and-set a statement"
        main = checked[0] if checked else len(group) - 1
        sql = joined(tuple(sql for sql, _, _ in group), main)
        params = {
            f"w{i}_{k}": v for i, (_, values, _) in enumerate(group) for k, v in values.items()
        }
        error = group[main][2]
        if error is None:
            self.execute(sql, params, prepare=True)
        else:
            self.expect_one(sql, params, error, prepare=True)

    def execute(
        self,
        sql: str,
        params: dict[str, Any] | Sequence[Any] | None = None,
        cursor: Any = None,
        *,
        binary: bool = False,
        prepare: bool = False,
    ) -> Any:
        """Run a statement (queue it, in a pipeline); returns the cursor it ran on.

        ``binary``: PostgreSQL receives the parameters in binary form. Worth it for arrays
        (one value per row of a batch): psycopg writes a text array by quoting each element
        with a regular expression.

        ``prepare``: PostgreSQL keeps the statement prepared on the connection, so a later
        run is neither parsed nor planned again: for the receiver's statements of every
        batch (a unit's writes together, the read ahead, the events' append), each by
        primary key or over arrays, whose plan does not change with the data."""
        if self._together is not None:
            assert cursor is None and not binary, "a write whose result nobody reads"
            assert not sql.lstrip().startswith("SELECT"), "no reads in together()"
            assert not isinstance(params, Sequence), "together() joins statements by name"
            self._together.append((sql, params or {}, None))
            return None
        cur = self._cursor if cursor is None else cursor
        if not sql.lstrip().startswith("SELECT"):
            self._before_write()
            self.writes += 1
        if self.dialect == "sqlite":
            cur.execute(*bound(sql, params))
            return cur
        sql = pyformat(sql, binary)
        if self._pipeline is None:
            self.round_trips += 1
        cur.execute(sql, params or {}, prepare=prepare or None)
        return cur

    def all(
        self,
        sql: str,
        params: dict[str, Any] | None = None,
        *,
        binary: bool = False,
        prepare: bool = False,
    ) -> list[Row]:
        cur = self.execute(sql, params, binary=binary, prepare=prepare)
        found = self._fetch(cur.fetchall)
        names = self._names(cur)
        row = row_type(names)
        return [row(zip(names, r, strict=True)) for r in found]

    def one(self, sql: str, params: dict[str, Any] | None = None) -> Row | None:
        cur = self.execute(sql, params)
        found = self._fetch(cur.fetchone)
        if found is None:
            return None
        names = self._names(cur)
        return row_type(names)(zip(names, found, strict=True))

    def _names(self, cur: Any) -> tuple[str, ...]:
        """The result's column names, from the result itself: psycopg's ``description``
        builds a column object per column, with its type looked up, on every call."""
        if self.dialect == "sqlite":
            return tuple(d[0] for d in cur.description)
        result = cur.pgresult
        return tuple(result.fname(i).decode() for i in range(result.nfields))

    def _fetch(self, fetch: Any) -> Any:
        if self._pipeline is not None:
            self.round_trips += 1  # the read flushes what is queued and waits for it
        return fetch()

    def update(self, sql: str, params: dict[str, Any]) -> int:
        """Run an UPDATE/DELETE and return how many rows it changed (waiting for it, in a
        pipeline)."""
        assert self._together is None, "a count is read at once: not in together()"
        cur = self.execute(sql, params)
        if self._pipeline is not None:
            self.round_trips += 1
            self._pipe.sync()
        return int(cur.rowcount)

    def expect_one(
        self, sql: str, params: dict[str, Any], error: type[Exception], *, prepare: bool = False
    ) -> None:
        """Run an UPDATE that must change exactly one row, else ``error`` is raised: at once,
        or in a pipeline by :meth:`settle`, so a compare-and-set costs no round trip of its
        own (its own cursor keeps its row count apart from the statements queued after it)."""
        if self._together is not None:
            self._together.append((sql, params, error))
            return
        if self._pipeline is None:
            if self.update(sql, params) != 1:
                raise error()
            return
        cursor = self.execute(sql, params, self._pooled.driver_connection.cursor(), prepare=prepare)
        self._expected.append((cursor, error))

    def counted_later(self, sql: str, params: dict[str, Any]) -> Callable[[], int]:
        """Run a statement whose row count is read later: the function returned gives it
        once a read or :meth:`settle` has waited for the statement (in a pipeline; at once
        on SQLite), so the statement costs no round trip of its own. It runs on a cursor of
        its own, which keeps its row count apart from the statements queued after it."""
        cursor = self.execute(sql, params, self._pooled.driver_connection.cursor())
        counted: list[int] = []

        def count() -> int:
            if not counted:
                counted.append(int(cursor.rowcount))
                cursor.close()
            return counted[0]

        return count

    def time(self, value: datetime | None) -> Any:
        """``value`` as bound to a statement. A batch binds the same few times again and
        again (its dispatches' deadlines are all its time plus the same delay, each bound for
        the operation and for its attempt): each is bound once a transaction. Keyed
        with the offset too: two times of a zone that differ only by ``fold`` are equal
        datetimes but different instants."""
        if value is None:
            return None
        key = (value, value.utcoffset())
        bound = self._times.get(key)
        if bound is None:
            bound = self._times[key] = self._bind_time(value)
        return bound

    # ------------------------------------------------------------------ events

    def event(
        self,
        kind: str,
        operation_id: str | None,
        data: dict[str, Any],
        hold_id: int | None = None,
    ) -> None:
        """Record an event; :func:`flowledger.storage.chain.append_events` chains the
        transaction's events just before its commit."""
        self.events.append(PendingEvent(self.now, self.actor, kind, operation_id, hold_id, data))

    def many(self, sql: str, rows: Sequence[Sequence[Any]] | Sequence[dict[str, Any]]) -> None:
        """Run a statement once per row (``executemany``): rows of values by name, or (SQLite,
        ``?`` parameters) by position."""
        assert self._together is None, "not in together()"
        self._before_write()
        self.writes += 1
        if self.dialect != "sqlite":
            sql = pyformat(sql)
            if self._pipeline is None:
                self.round_trips += 1  # psycopg sends the rows in one pipeline of its own
        self._cursor.executemany(sql, rows)
