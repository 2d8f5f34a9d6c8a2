"""The staleness sweep: find what waited too long and open a hold for it, once per cause.

Each rule reads its due rows through an index (operations by (state, deadline, operation_id) and
(state, updated_at, operation_id); holds by (resolved_at, deadline); running executions by
(final, status, started_at, id)) inside a write transaction, a bounded batch at a time (the
failed-execution rule reads their ids first, without a lock, and each batch of them again in the
write transaction), and opens the holds through :meth:`Ledger.open_holds` in that same
transaction, so each opening is an event (and an alert when alerting is configured). Rows that
already have their hold are left out by the query itself (``NOT EXISTS`` on the unique cause
key), so a sweep opens nothing twice. Each batch starts where the last one ended (a
:class:`Walk` in the index's order; the failed-execution rule walks a list of ids it read first,
a :class:`Listed`): starting each from the beginning read every row already passed again, so a
sweep that opened 100,000 holds over 10,000,000 operations took 107 s on SQLite against 0.74 s
for 10,000 over 1,000,000 (``python -m bench.sweep``). On SQLite a batch starts once the one
before has committed; on PostgreSQL, for the rules that lock their rows, as soon as the one
before has read and locked them, so that one batch's holds are built while the server writes the
other's (:meth:`Sweep._overlapped`).

Races with the workflow: the due operations are locked (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises writers anyway) until the hold commits.
Every writer locks the operation it reads (``flowledger.services.records.lock_operations``), so an
operation a confirm is deciding on is skipped until a later sweep; a confirm that reads one
the sweep holds waits for the hold's commit, then sees the hold and resolves it; a confirm
that committed first moves the operation out of ``dispatching`` and the sweep's query no
longer matches it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, Self, TypeVar

import sqlalchemy as sa

from flowledger import domain
from flowledger.config import SourceConfig, SweepConfig
from flowledger.domain import NewHold, Reason, State, causes, staleness
from flowledger.services.ledger import HoldTarget, Ledger
from flowledger.storage.models import Execution, Hold, Operation, Source, table
from flowledger.storage.tx import Tx
from flowledger.sync.copies import ensure_source

OPS = table(Operation)
# What the operation rules read of a due row: its hold's detail and target, and the walk's
# columns (the hold's cause key comes with it, from the rule's own SQL). Not the whole row,
# nor an Operation made of it: a profile of the first sweep on PostgreSQL put ``to_domain``
# and the processing of whole rows at about 18 µs a hold.
DUE_COLUMNS = (
    OPS.c.operation_id, OPS.c.execution_id, OPS.c.source, OPS.c.deadline, OPS.c.updated_at,
)  # fmt: skip
HOLDS = table(Hold)
EXECUTIONS = table(Execution)
SOURCES = table(Source)

log = logging.getLogger(__name__)

# One rule reads at most this many rows per transaction.
BATCH = 500
# On PostgreSQL, how many batches of one rule may be in flight at once (see Sweep._overlapped).
IN_FLIGHT = 2
# The execution_failed rule reads at most this many ids of due operations at once.
CANDIDATES = 50_000


@dataclass
class SweepResult:
    """Holds opened by each rule in one sweep, and the seconds each rule took."""

    opened: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.opened.values())


def sql_cause_key(reason: Reason, **parts: sa.ColumnElement[Any]) -> sa.ColumnElement[str]:
    """:func:`flowledger.domain.causes.cause_key` as SQL over columns: the same prefix, parts and
    order, from the same table (a property test compares the two on both databases)."""
    prefix, names = causes.PARTS[reason]
    if set(parts) != set(names):
        raise TypeError(f"{reason.value} cause key takes {names}, got {tuple(parts)}")
    key: sa.ColumnElement[str] = sa.literal(prefix, sa.String)
    for name in names:
        part = parts[name]
        text = part if isinstance(part.type, sa.String) else sa.cast(part, sa.String)
        key = key + ":" + text
    return key


def _told(event: threading.Event, _: object) -> None:
    event.set()


def _unheld(key: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
    return ~sa.exists().where(HOLDS.c.cause_key == key)


# Each rule's "no hold for this cause yet", built once: built (with its cause key) for every
# batch, it cost about 1 ms of a 500-hold batch in a profile of the sweep. The operation rules
# also read the key itself with each row, for the hold they open: built in Python for each row
# (``causes.cause_key``, the same text, pinned by a property test) it took about a tenth of the
# sweep's CPU; a 10x first sweep on PostgreSQL went from 4.00-4.31 s to 3.81-3.85 s.
_UNKNOWN_KEY = sql_cause_key(
    Reason.UNKNOWN_OUTCOME, operation_id=OPS.c.operation_id, attempt=OPS.c.attempt
)
_UNKNOWN_UNHELD = _unheld(_UNKNOWN_KEY)
_FAILED_KEY = sql_cause_key(
    Reason.EXECUTION_FAILED,
    operation_id=OPS.c.operation_id,
    attempt=OPS.c.attempt,
    execution_id=EXECUTIONS.c.external_id,
)
_FAILED_UNHELD = _unheld(_FAILED_KEY)
_PREPARED_KEY = sql_cause_key(
    Reason.STALE_PREPARED, operation_id=OPS.c.operation_id, attempt=OPS.c.attempt
)
_PREPARED_UNHELD = _unheld(_PREPARED_KEY)
_STUCK_UNHELD = _unheld(
    sql_cause_key(
        Reason.EXECUTION_STUCK, source=EXECUTIONS.c.source, execution_id=EXECUTIONS.c.external_id
    )
)


def _failed_due() -> tuple[sa.ColumnElement[bool], ...]:
    """The execution_failed rule's conditions over :data:`_FAILED_JOIN`."""
    failed = sa.or_(
        EXECUTIONS.c.status.in_(staleness.FAILED_EXECUTION_STATUSES),
        sa.and_(EXECUTIONS.c.gone_at.is_not(None), EXECUTIONS.c.final.is_(False)),
    )
    # Execution ids repeat across tool instances. An operation that names no source is
    # matched only by an id no other source also has, and only within its own workflow: a
    # blocking hold from a stranger's failure would stop a healthy write (the
    # unknown_outcome deadline still catches an operation this leaves unmatched).
    other = EXECUTIONS.alias("other")
    ambiguous = sa.exists().where(
        other.c.external_id == EXECUTIONS.c.external_id,
        other.c.source != EXECUTIONS.c.source,
    )
    same_workflow = sa.or_(
        OPS.c.workflow_id.is_(None),
        EXECUTIONS.c.workflow_id.is_(None),
        OPS.c.workflow_id == EXECUTIONS.c.workflow_id,
    )
    ours = sa.or_(
        OPS.c.source == EXECUTIONS.c.source,
        sa.and_(OPS.c.source.is_(None), same_workflow, ~ambiguous),
    )
    return OPS.c.state == State.DISPATCHING.value, ours, failed, _FAILED_UNHELD


_FAILED_JOIN = OPS.join(EXECUTIONS, EXECUTIONS.c.external_id == OPS.c.execution_id)
_FAILED_DUE = _failed_due()

# A batch of work: given the transaction, return (holds opened, whether to read another batch).
Step = Callable[[Tx], tuple[int, bool]]


class Walk:
    """Where a rule's walk over its due rows stands, in the order of ``columns`` (unique
    together, and the tail of an index after the rule's equality conditions). A batch reads
    the rows after the last committed batch's last row; the walk moves there only once that
    batch is committed (:meth:`advance`), so a batch that lost a race reads the same rows.
    :meth:`following` is the walk of the batch after this one's rows, for a batch that starts
    before this one has committed (see ``Sweep._overlapped``); ``on_page`` is told when a
    batch has read its rows."""

    def __init__(self, *columns: sa.ColumnElement[Any], at: tuple[Any, ...] | None = None) -> None:
        self.columns = columns
        self._at = at
        self._next = at
        self.limit = 0
        self.full = False
        self.on_page: Callable[[], None] | None = None

    def page(self, stmt: sa.Select[Any], limit: int) -> sa.Select[Any]:
        self.limit = limit
        stmt = stmt.order_by(*self.columns).limit(limit)
        if self._at is not None:
            at = (sa.literal(v, c.type) for v, c in zip(self._at, self.columns, strict=True))
            stmt = stmt.where(sa.tuple_(*self.columns) > sa.tuple_(*at))
        return stmt

    def saw(self, rows: Sequence[Any]) -> None:
        """The batch read ``rows`` of its :meth:`page` (selected with the walk's columns,
        under their names): the next starts after them, and a full page means more may
        wait."""
        if rows:
            self._next = tuple(getattr(rows[-1], str(c.key)) for c in self.columns)
        self.full = len(rows) == self.limit
        if self.on_page is not None:
            self.on_page()

    def advance(self) -> None:
        self._at = self._next

    def following(self) -> Walk:
        return Walk(*self.columns, at=self._next)


class Listed:
    """A walk over ids read beforehand, ``size`` at a time, in their order: what
    :class:`Walk` offers a rule, for one whose due rows are cheaper found in one read
    (``Sweep._execution_failed``). A batch's rows are the ids of :attr:`chunk`."""

    def __init__(self, ids: Sequence[str], size: int, *, at: int = 0) -> None:
        self.ids = ids
        self.size = size
        self._at = at
        self.on_page: Callable[[], None] | None = None

    @property
    def chunk(self) -> Sequence[str]:
        return self.ids[self._at : self._at + self.size]

    @property
    def full(self) -> bool:
        """More ids wait after this batch's."""
        return self._at + self.size < len(self.ids)

    def saw(self, rows: Sequence[Any]) -> None:
        if self.on_page is not None:
            self.on_page()

    def advance(self) -> None:
        self._at += self.size

    def following(self) -> Listed:
        return Listed(self.ids, self.size, at=self._at + self.size)


class Pages(Protocol):
    """What a rule's batches walk: a :class:`Walk` or a :class:`Listed`."""

    on_page: Callable[[], None] | None

    @property
    def full(self) -> bool: ...

    def saw(self, rows: Sequence[Any]) -> None: ...

    def advance(self) -> None: ...

    def following(self) -> Self: ...


P = TypeVar("P", bound=Pages)


class Sweep:
    """The sweep over one ledger. ``sources`` are the configured sources (their intervals say
    when each is stale); ``actor`` names who opened the holds in the event log."""

    def __init__(
        self,
        ledger: Ledger,
        cfg: SweepConfig,
        sources: Sequence[SourceConfig] = (),
        *,
        batch: int = BATCH,
        actor: str = "sweep",
    ) -> None:
        self.ledger = ledger
        self.cfg = cfg
        self.sources = list(sources)
        self.batch = batch
        self.actor = actor

    def run(self) -> SweepResult:
        result = SweepResult()
        by_deadline = (OPS.c.deadline, OPS.c.operation_id)
        by_update = (OPS.c.updated_at, OPS.c.operation_id)
        by_start = (EXECUTIONS.c.started_at, EXECUTIONS.c.id)
        rules: list[tuple[str, Callable[[], int]]] = [
            ("unknown_outcome", partial(self._walk, self._unknown_outcome, Walk(*by_deadline))),
            (
                "unknown_outcome",
                partial(self._walk, self._unknown_outcome_no_deadline, Walk(*by_update)),
            ),
            ("execution_failed", self._execution_failed),
            ("stale_prepared", partial(self._walk, self._stale_prepared, Walk(*by_update))),
            (
                "execution_stuck",
                partial(self._walk, self._execution_stuck, Walk(*by_start), locks=False),
            ),
            ("source_stale", partial(self._drain, self._source_stale)),
            # Last, so that a hold opened above is not reported overdue in the same sweep.
            ("overdue", partial(self._drain, *self._overdue())),
        ]
        for reason, drain in rules:
            self._timed(result, reason, drain)
        if result.total:
            log.info("sweep opened %d holds: %s", result.total, result.opened)
        return result

    @staticmethod
    def _timed(result: SweepResult, reason: str, drain: Callable[[], int]) -> None:
        started = time.perf_counter()
        result.opened[reason] = result.opened.get(reason, 0) + drain()
        spent = time.perf_counter() - started
        result.seconds[reason] = result.seconds.get(reason, 0.0) + spent

    def _walk(
        self, rule: Callable[[P, Tx], tuple[int, bool]], walk: P, *, locks: bool = True
    ) -> int:
        # Only a rule that locks the rows it reads overlaps its batches: a batch read again
        # after a lost race skips the rows the next one holds instead of reading into them.
        if locks and self.ledger.store.dialect == "postgresql":
            return self._overlapped(rule, walk)
        return self._drain(partial(rule, walk), walk.advance)

    def _overlapped(self, rule: Callable[[P, Tx], tuple[int, bool]], walk: P) -> int:
        """PostgreSQL: each batch in its own transaction, the next one starting as soon as
        this one has read and locked its rows, so that one batch's holds are built while the
        server writes the one before; :data:`IN_FLIGHT` at most. Their rows do not overlap:
        the next batch starts after this one's last row, and each skips rows another has
        locked. A batch that lost a race reads again from its own start, past the rows the
        next one holds (a row that became due inside its range meanwhile waits for the next
        sweep). The figures, the tree before and this one taking turns, are in the README
        (``python -m bench.sweep --ops 1000000 --due 100000``)."""
        opened = 0
        inflight: deque[Future[tuple[int, bool]]] = deque()
        with ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="sweep") as pool:
            try:
                while True:
                    read = threading.Event()
                    walk.on_page = read.set
                    batch = pool.submit(self.ledger.run, self.actor, partial(rule, walk))
                    batch.add_done_callback(partial(_told, read))
                    inflight.append(batch)
                    read.wait()
                    if len(inflight) >= IN_FLIGHT:
                        opened += inflight.popleft().result()[0]
                    if not walk.full or (batch.done() and batch.exception() is not None):
                        break
                    walk = walk.following()
            except BaseException:
                wait(inflight)  # the others end first; the error raised is this one
                raise
            while inflight:
                opened += inflight.popleft().result()[0]
        return opened

    def _drain(self, step: Step, committed: Callable[[], None] | None = None) -> int:
        """Run ``step`` until it says there is no more; ``committed`` is told after each
        batch's commit (a step that lost a race runs again from where it stood)."""
        opened = 0
        while True:
            new, more = self.ledger.run(self.actor, step)
            if committed is not None:
                committed()
            opened += new
            if not more:
                return opened

    # ------------------------------------------------------------------ operations

    def _locked(self, stmt: sa.Select[Any], of: sa.Table) -> sa.Select[Any]:
        if self.ledger.store.dialect == "postgresql":
            return stmt.with_for_update(skip_locked=True, of=of)
        return stmt

    def _open(self, tx: Tx, targets: list[HoldTarget], *, locked: bool = False) -> int:
        """Open the holds of ``targets`` that have none yet; how many were opened.
        ``locked``: the rule read their operations with a lock (see above), or its holds
        need none (``overdue``)."""
        return sum(1 for i in self.ledger.open_holds(tx, targets, locked=locked) if i)

    def _unknown_outcome(self, walk: Walk, tx: Tx) -> tuple[int, bool]:
        rows = tx.conn.execute(
            self._locked(
                walk.page(
                    sa.select(*DUE_COLUMNS, _UNKNOWN_KEY.label("cause_key")).where(
                        OPS.c.state == State.DISPATCHING.value,
                        OPS.c.deadline <= tx.now,
                        _UNKNOWN_UNHELD,
                    ),
                    self.batch,
                ),
                OPS,
            )
        ).all()
        walk.saw(rows)
        return self._open(tx, [self._unknown(r) for r in rows], locked=True), walk.full

    def _unknown_outcome_no_deadline(self, walk: Walk, tx: Tx) -> tuple[int, bool]:
        """Operations without a deadline of their own wait ``[sweep] dispatch_deadline``
        from their last change."""
        due = staleness.cutoff(tx.now, self.cfg.dispatch_deadline)
        rows = tx.conn.execute(
            self._locked(
                walk.page(
                    sa.select(*DUE_COLUMNS, _UNKNOWN_KEY.label("cause_key")).where(
                        OPS.c.state == State.DISPATCHING.value,
                        OPS.c.updated_at <= due,
                        OPS.c.deadline.is_(None),
                        _UNKNOWN_UNHELD,
                    ),
                    self.batch,
                ),
                OPS,
            )
        ).all()
        walk.saw(rows)
        return self._open(tx, [self._unknown(r) for r in rows], locked=True), walk.full

    def _unknown(self, row: Any) -> HoldTarget:
        detail = staleness.unknown_outcome_detail(row.deadline, row.execution_id)
        return HoldTarget(
            NewHold.of(Reason.UNKNOWN_OUTCOME, row.cause_key, detail),
            row.operation_id,
            execution_id=row.execution_id,
            source=row.source,
        )

    def _execution_failed(self) -> int:
        """Operations whose execution failed. Their ids are read first, without a lock and
        :data:`CANDIDATES` at most at a time, then a batch of them at a time again, locked,
        under the same conditions (a confirm may have settled one meanwhile). A walk over the
        dispatching operations in (updated_at, operation_id) order, as the other rules do,
        joined each to its execution batch after batch, and its last batch read every
        in-flight operation to find there were no more: 0.96-1.05 s of a 10x first sweep on
        PostgreSQL for 10,000 holds, against 0.63-0.66 s this way (the same cloned ledger of
        ``python -m bench.sweep --scale 10``, the two trees taking turns); one read of the
        ids took 80-125 ms."""
        walk = Walk(OPS.c.updated_at, OPS.c.operation_id)
        due = sa.select(*walk.columns).select_from(_FAILED_JOIN).where(*_FAILED_DUE)
        opened = 0
        while True:
            with self.ledger.store.reader.connect() as conn:
                rows = conn.execute(walk.page(due, CANDIDATES)).all()
            walk.saw(rows)
            walk.advance()
            if rows:
                ids = [r.operation_id for r in rows]
                opened += self._walk(self._execution_failed_batch, Listed(ids, self.batch))
            if not walk.full:
                return opened

    def _execution_failed_batch(self, listed: Listed, tx: Tx) -> tuple[int, bool]:
        rows = tx.conn.execute(
            self._locked(
                sa.select(
                    *DUE_COLUMNS,
                    EXECUTIONS.c.status.label("execution_status"),
                    EXECUTIONS.c.gone_at.label("execution_gone_at"),
                    _FAILED_KEY.label("cause_key"),
                )
                .select_from(_FAILED_JOIN)
                .where(OPS.c.operation_id.in_(listed.chunk), *_FAILED_DUE)
                .order_by(OPS.c.updated_at, OPS.c.operation_id),  # the events' order
                OPS,
            )
        ).all()
        listed.saw(rows)
        targets = []
        for r in rows:
            status = r.execution_status
            if status not in staleness.FAILED_EXECUTION_STATUSES:
                status = f"{status} and vanished from the tool"
            detail = staleness.execution_failed_detail(status, r.execution_id)
            targets.append(
                HoldTarget(
                    NewHold.of(Reason.EXECUTION_FAILED, r.cause_key, detail),
                    r.operation_id,
                    execution_id=r.execution_id,
                    source=r.source,
                )
            )
        return self._open(tx, targets, locked=True), listed.full

    def _stale_prepared(self, walk: Walk, tx: Tx) -> tuple[int, bool]:
        due = staleness.cutoff(tx.now, self.cfg.stale_prepared_after)
        rows = tx.conn.execute(
            self._locked(
                walk.page(
                    sa.select(
                        OPS.c.operation_id,
                        OPS.c.updated_at,
                        OPS.c.source,
                        _PREPARED_KEY.label("cause_key"),
                    ).where(
                        OPS.c.state == State.PREPARED.value,
                        OPS.c.updated_at <= due,
                        _PREPARED_UNHELD,
                    ),
                    self.batch,
                ),
                OPS,
            )
        ).all()
        walk.saw(rows)
        targets = [
            HoldTarget(
                NewHold.of(
                    Reason.STALE_PREPARED,
                    r.cause_key,
                    staleness.stale_prepared_detail(r.updated_at),
                ),
                r.operation_id,
                source=r.source,
            )
            for r in rows
        ]
        return self._open(tx, targets, locked=True), walk.full

    # ------------------------------------------------------------------ executions, sources

    def _execution_stuck(self, walk: Walk, tx: Tx) -> tuple[int, bool]:
        due = staleness.cutoff(tx.now, self.cfg.execution_stuck_after)
        rows = tx.conn.execute(
            walk.page(
                sa.select(
                    EXECUTIONS.c.id,
                    EXECUTIONS.c.source,
                    EXECUTIONS.c.external_id,
                    EXECUTIONS.c.started_at,
                ).where(
                    EXECUTIONS.c.final.is_(False),
                    EXECUTIONS.c.status == staleness.RUNNING_EXECUTION_STATUS,
                    EXECUTIONS.c.gone_at.is_(None),
                    EXECUTIONS.c.started_at <= due,
                    _STUCK_UNHELD,
                ),
                self.batch,
            )
        ).all()
        walk.saw(rows)
        targets = [
            HoldTarget(
                staleness.execution_stuck_hold(r.source, r.external_id, r.started_at),
                execution_id=r.external_id,
                source=r.source,
            )
            for r in rows
        ]
        return self._open(tx, targets), walk.full

    def _source_stale(self, tx: Tx) -> tuple[int, bool]:
        if not self.sources:
            return 0, False
        known = {
            r.name: r
            for r in tx.conn.execute(
                sa.select(SOURCES.c.name, SOURCES.c.last_success_at, SOURCES.c.first_seen_at).where(
                    SOURCES.c.name.in_([s.name for s in self.sources])
                )
            )
        }
        targets = []
        for src in self.sources:
            row = known.get(src.name)
            last = row.last_success_at if row is not None else None
            first = row.first_seen_at if row is not None else None
            if row is None or first is None:  # never synced nor seen: it is seen now
                ensure_source(tx, src.name, src.kind, src.base_url)
                first = tx.now
            reference = last or first
            n = self.cfg.source_stale_intervals
            if staleness.source_stale_due(reference, src.interval, n, tx.now):
                hold = staleness.source_stale_hold(src.name, last, src.interval, n)
                targets.append(HoldTarget(hold, source=src.name))
        # A handful of rows: one pass, never a second batch.
        return self._open(tx, targets), False

    # ------------------------------------------------------------------ holds

    def _overdue(self) -> tuple[Step, Callable[[], None]]:
        """Open holds past their deadline (overdue holds themselves excepted), walked in
        (deadline, id) order; those already reported are skipped by their cause key. The walk
        moves on only once a batch is committed."""
        cursor: list[Any] = []
        proposed: list[Any] = []

        def advance() -> None:
            cursor[:] = proposed

        def step(tx: Tx) -> tuple[int, bool]:
            stmt = (
                sa.select(
                    HOLDS.c.id,
                    HOLDS.c.reason,
                    HOLDS.c.deadline,
                    HOLDS.c.operation_id,
                    HOLDS.c.execution_id,
                    HOLDS.c.source,
                )
                .where(
                    HOLDS.c.resolved_at.is_(None),
                    HOLDS.c.deadline <= tx.now,
                    HOLDS.c.reason != domain.Reason.OVERDUE.value,
                )
                .order_by(HOLDS.c.deadline, HOLDS.c.id)
                .limit(self.batch)
            )
            if cursor:
                deadline, hold_id = cursor
                stmt = stmt.where(
                    sa.or_(
                        HOLDS.c.deadline > deadline,
                        sa.and_(HOLDS.c.deadline == deadline, HOLDS.c.id > hold_id),
                    )
                )
            rows = tx.conn.execute(self._locked(stmt, HOLDS)).all()
            targets = [
                HoldTarget(
                    staleness.overdue_hold(r.id, r.reason, r.deadline),
                    r.operation_id,
                    execution_id=r.execution_id,
                    source=r.source,
                    refers_to=r.id,
                )
                for r in rows
            ]
            # The holds it reports are locked, and a writer closing one closes the overdue
            # holds about it after the wait (records.open_overdue_about): an overdue hold,
            # which blocks no write, needs no lock of its operation, and taking one while
            # holding the hold's deadlocked a confirm that holds the operation and waits
            # to close the hold.
            opened = self._open(tx, targets, locked=True)
            proposed[:] = [rows[-1].deadline, rows[-1].id] if rows else cursor
            # Rows already reported open nothing; keep walking while a full batch came back.
            return opened, len(rows) == self.batch

        return step, advance
