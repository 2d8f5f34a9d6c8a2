"""The unit of work: one write transaction, run again from the start when it lost a race.

Every change to the ledger is a function of a transaction (a *work*: given a
:class:`~flowledger.storage.transaction.SqlTx`, written against the services' port). The
:class:`UnitOfWork` runs one work in its own transaction (:meth:`UnitOfWork.run`) or many
works in one transaction, one commit and one fsync (:meth:`UnitOfWork.run_many`, the receiver's
group commit), appends their events to the chain just before the commit, and retries what lost
a race: a compare-and-set another writer won, a unique key another writer took first, or
(PostgreSQL) a serialization failure or deadlock. A service hands out its work as a
:class:`flowledger.services.call.Call`, so a call is checked before any transaction and run one
way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC
from typing import Any, TypeVar

import sqlalchemy as sa

from flowledger.domain.records import direct_init
from flowledger.domain.redact import NO_SECRETS, Secrets, redact, secrets_of
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.plumbing.faults import crashpoint
from flowledger.plumbing.metrics import WAL_CHECKPOINTS_SHORT
from flowledger.storage import chain, operations
from flowledger.storage.engine import CHECKPOINT_EVERY, WAL_RESET_AFFECTED, Store
from flowledger.storage.transaction import SqlTx
from flowledger.storage.tx import Conflict, Tx

log = logging.getLogger(__name__)
T = TypeVar("T")
Work = Callable[[SqlTx], T]
# A check that refuses (raises) or lets pass.
Verdict = Callable[[], None]
# Run ahead of a unit of :meth:`UnitOfWork.run_many`, outside its savepoint: what it writes
# stays when the unit fails. It answers with its verdict, given once its statements have been
# waited for (with the unit's own, in a pipeline): a refusal refuses the unit alone.
Guard = Callable[[Tx], Verdict]


@direct_init
@dataclass(frozen=True)
class Outcome:
    """What one unit of a :meth:`UnitOfWork.run_many` batch returned, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


class _BatchAborted(Exception):
    """The server aborted a batch's transaction to break a deadlock: run it all again."""


class _Isolate(Exception):
    """A unit of a batch run without savepoints failed after writing (or lost a race, or
    was refused by its guard): run the batch again with a savepoint per unit."""


def _aborted_by_server(exc: BaseException) -> bool:
    """A PostgreSQL serialization failure or deadlock."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) in ("40001", "40P01")


class UnitOfWork:
    """Transactions over one store. ``clock`` is injectable for tests; ``retries`` bounds how
    often a work that keeps losing races runs again; ``secrets`` are the configured secrets
    that :meth:`redact` takes out of outside text."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = utcnow,
        retries: int = 20,
        secrets: Secrets = NO_SECRETS,
    ) -> None:
        self.store = store
        self.secrets = secrets
        self.clock = clock
        self.retries = retries
        self.commits = 0  # transactions committed, for the WAL checkpoints and the tests
        self.round_trips = 0  # what its transactions waited for (:attr:`Tx.round_trips`), summed
        self.checkpoints_short = 0  # WAL checkpoints a reader left short, summed
        self._dbapi = store.engine.dialect.dbapi

    @contextmanager
    def transaction(self, actor: str) -> Iterator[SqlTx]:
        """One write transaction; events are appended just before the commit. Runs on the
        driver's connection straight from the pool: SQLAlchemy's per-transaction machinery
        costs more than the statements of a dispatch."""
        tx = SqlTx(
            self.store.engine,
            self.store.engine.raw_connection(),
            self.clock().astimezone(UTC),
            actor,
            self.store.chain_hint,
        )
        try:
            tx.begin()
            yield tx
            chain.append_events(tx)
            crashpoint("before_commit")
            tx.commit()
        except BaseException:
            tx.rollback()
            raise
        finally:
            tx.close()
            self.round_trips += tx.round_trips
        self.commits += 1
        if WAL_RESET_AFFECTED and self.commits % CHECKPOINT_EVERY == 0:
            try:
                whole = self.store.checkpoint()
            except Exception:  # committed already; a busy checkpoint is tried again later
                log.warning("WAL checkpoint failed; the next one will try again", exc_info=True)
            else:
                if not whole:  # a reader (a backup) still needs the rest
                    self.checkpoints_short += 1
                    WAL_CHECKPOINTS_SHORT.inc()  # the writer process's: sent on with its answers
                    log.warning(
                        "WAL checkpoint left short: a reader on an older snapshot (a backup?) "
                        "still needs part of the WAL; the next checkpoint, %d commits on, "
                        "copies the rest (%d left short so far)",
                        CHECKPOINT_EVERY,
                        self.checkpoints_short,
                    )

    def add_secrets(self, values: Iterable[str]) -> None:
        """Redact ``values`` too from now on."""
        self.secrets = secrets_of([*self.secrets.values, *values])

    def redact(self, text: str) -> str:
        """``text`` from a tool or a target as it may be stored, logged or shown: the one
        redactor (:func:`flowledger.domain.redact.redact`) with this ledger's secrets."""
        return redact(text, self.secrets)

    def run(self, actor: str, work: Work[T]) -> T:
        """Run ``work`` in a transaction, again from the start when it lost a race."""
        for attempt in range(self.retries):
            last = attempt + 1 >= self.retries
            try:
                with self.transaction(actor) as tx:
                    return work(tx)
            except Conflict:
                if last:
                    raise
            except Exception as exc:
                if last or not self._lost_race(exc):
                    raise
        raise RuntimeError("unreachable")

    def _lost_race(self, exc: BaseException) -> bool:
        orig = getattr(exc, "orig", exc)
        dbapi = self._dbapi
        if dbapi is not None and isinstance(orig, dbapi.IntegrityError):
            return True
        return _aborted_by_server(exc)

    def run_many(
        self,
        units: Sequence[tuple[str, Work[Any]]],
        guards: Sequence[Guard | None] = (),
        reads: Sequence[str | None] = (),
    ) -> list[Outcome]:
        """Run several works in ONE transaction (one commit, one fsync), each as if inside its
        own SAVEPOINT: a work that raises rolls back only its own writes and events, and its error
        is returned in its :class:`Outcome`. When the transaction itself fails (the commit, the
        chain append, a broken connection) every unit gets that error: nothing of the batch is
        durable, so no caller may answer as if it were.

        ``guards`` (by position, None for a unit without one) run ahead of their unit's
        savepoint: the receiver records a request's signature so, in the commit of the write
        it authorises. A guard's verdict is read after its unit's statements (on PostgreSQL
        with them: no round trip of its own) and a refusal rolls back its unit alone; what a
        guard wrote stays even when its unit's work fails, so a signed request that was
        refused cannot be sent again once the state has changed.

        A deadlock or serialization failure (PostgreSQL, two batches locking the same
        operations in opposite orders) runs the whole batch again: retrying only the unit
        would wait again on a lock the other batch cannot release while this one keeps the
        locks of its earlier units.

        ``reads`` (by position, None where it is not known) names the operation each unit
        loads first: on PostgreSQL a batch run without savepoints reads them all ahead of
        its units, in one statement (:func:`operations.read_ahead`).

        A batch is first run without savepoints (:meth:`_run_shared`), and only when a unit
        fails after it wrote, loses a race or is refused by its guard is it rolled back and
        run again with a savepoint per unit (:meth:`_run_unit`): on PostgreSQL every
        statement in a pipeline is a send (and a wake-up of the server) of its own, and a
        savepoint costs two statements and a sync per unit (figures in ``bench/README.md``).
        A batch run again costs it once more, which only a lost race, a refused guard or a
        failure after writing brings about."""
        guarded = [
            (actor, work, guards[i] if i < len(guards) else None)
            for i, (actor, work) in enumerate(units)
        ]
        isolate = False
        for attempt in range(self.retries + 1):  # one more for the run with savepoints
            outcomes: list[Outcome] = []
            try:
                with self.transaction("batch") as tx:
                    if isolate:
                        for actor, work, guard in guarded:
                            outcomes.append(self._run_unit(tx, actor, work, guard))
                    else:
                        operations.read_ahead(tx, [op for op in reads if op is not None])
                        outcomes = self._run_shared(tx, guarded)
                    crashpoint("batch_before_commit")
            except _Isolate:
                isolate = True
                continue
            except Exception as exc:
                aborted = isinstance(exc, _BatchAborted) or _aborted_by_server(exc)
                if aborted and attempt + 1 < self.retries:
                    continue
                return [Outcome(error=exc) for _ in units]
            crashpoint("batch_after_commit")
            return outcomes
        raise RuntimeError("unreachable")

    def _run_shared(
        self, tx: SqlTx, guarded: Sequence[tuple[str, Work[Any], Guard | None]]
    ) -> list[Outcome]:
        """Every unit in the batch's transaction itself, no savepoint: the statements of all
        of them go out in one pipeline (PostgreSQL), a unit waits only where it reads, and
        the batch waits once at its end, where each compare-and-set is checked. A unit that
        raises before it wrote anything is refused alone (a missing operation, an illegal
        move, an ``Idempotency-Key`` in use); anything else raises :class:`_Isolate`.

        A guard's verdict is read before its unit's first write (:meth:`Tx.gate`): a refused
        signature is refused alone, its unit having written nothing. What the guard wrote
        stays when its unit fails before writing, as under a savepoint of the unit's own. A
        unit that wrote nothing before its end has its verdict read at the batch's end."""
        outcomes: list[Outcome] = []
        pending: list[tuple[int, Verdict, int]] = []  # verdicts not yet read at their unit's end
        for actor, work, guard in guarded:
            tx.actor = actor
            tx.pipeline()
            mark = len(tx.events)
            try:
                verdict = None if guard is None else guard(tx)
            except Exception as exc:
                raise _Isolate from exc  # its statement may have failed the transaction
            tx.gate(verdict)
            writes = tx.writes
            try:
                value = work(tx)
                crashpoint("batch_unit_queued")  # PostgreSQL: its statements not yet all sent
            except Exception as exc:
                if tx.writes != writes or self._from_database(exc):
                    raise _Isolate from exc
                del tx.events[mark:]
                try:
                    tx.open_gate()  # a refused request is refused, whatever its work said
                except Exception as refused:
                    if self._from_database(refused):
                        raise _Isolate from refused
                    exc = refused
                outcomes.append(Outcome(error=exc))
                continue
            if verdict is not None and tx.gate_pending():  # it wrote nothing
                pending.append((len(outcomes), verdict, len(tx.events) - mark))
            tx.gate(None)
            outcomes.append(Outcome(value=value))
        try:
            tx.settle()  # lost compare-and-sets surface here
        except Exception as exc:
            raise _Isolate from exc
        for at, verdict, events in pending:
            try:
                verdict()
            except Exception as refused:
                if events:  # its events are among the others': run the batch apart
                    raise _Isolate from refused
                outcomes[at] = Outcome(error=refused)
        return outcomes

    def _from_database(self, exc: BaseException) -> bool:
        """An error the database (or the driver) raised, or a lost compare-and-set: it may
        belong to an earlier unit whose statement failed in the pipeline."""
        if isinstance(exc, Conflict | sa.exc.SQLAlchemyError):
            return True
        dbapi = self._dbapi
        return dbapi is not None and isinstance(getattr(exc, "orig", exc), dbapi.Error)

    def _run_unit(
        self, tx: SqlTx, actor: str, work: Work[Any], guard: Guard | None = None
    ) -> Outcome:
        """One unit under its savepoint. On PostgreSQL its statements go out in a pipeline
        (:meth:`Tx.pipeline`): they are sent without waiting for each other, and the unit
        waits only where it reads a row and once at its end (:meth:`Tx.settle`), where any
        error of its statements is raised, so it is still this unit's to roll back. A unit
        that succeeded keeps its savepoint until the next unit's first statements release it
        (the commit releases the last): releasing it before the settle would leave nothing to
        roll back to when the settle finds a lost compare-and-set.

        A ``guard`` runs once, after the previous unit's savepoint is released and before
        this unit's (so no rollback to a savepoint undoes it); its verdict is read after the
        unit's settle, and after a failed work before the work's own error (a refused
        request is refused, never retried). A guard whose statement failed fails the
        transaction on PostgreSQL, and so the whole batch."""
        verdict: Verdict | None = None
        if guard is not None:
            tx.actor = actor
            tx.pipeline()
            if tx.savepoint_held:
                tx.execute("RELEASE SAVEPOINT flowledger_unit")
                tx.savepoint_held = False
            try:
                verdict = guard(tx)
            except Exception as exc:
                tx.abandon()
                if _aborted_by_server(exc):
                    raise _BatchAborted from exc  # the whole transaction rolls back
                return Outcome(error=exc)
        for attempt in range(self.retries):
            tx.actor = actor
            mark = len(tx.events)
            tx.pipeline()
            if tx.savepoint_held:
                tx.execute("RELEASE SAVEPOINT flowledger_unit")
            tx.execute("SAVEPOINT flowledger_unit")
            tx.savepoint_held = True
            try:
                value = work(tx)
                crashpoint("batch_unit_queued")  # PostgreSQL: its statements not yet all sent
                tx.settle()  # the unit's own errors and lost compare-and-sets surface here
                if verdict is not None:
                    verdict()  # the guard's statement was waited for with the unit's
            except Exception as exc:
                tx.abandon()
                if _aborted_by_server(exc):
                    raise _BatchAborted from exc  # the whole transaction rolls back
                tx.execute("ROLLBACK TO SAVEPOINT flowledger_unit")
                tx.execute("RELEASE SAVEPOINT flowledger_unit")
                tx.savepoint_held = False
                del tx.events[mark:]
                if verdict is not None:
                    try:
                        verdict()
                    except Exception as refused:
                        return Outcome(error=refused)
                lost = isinstance(exc, Conflict) or self._lost_race(exc)
                if lost and attempt + 1 < self.retries:
                    continue
                return Outcome(error=exc)
            return Outcome(value=value)
        raise RuntimeError("unreachable")
