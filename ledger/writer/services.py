"""The only writer: every change to operations, attempts, receipts and holds goes through here,
with its event, in one transaction.

Each public method runs one transaction: read the rows the rule needs, ask ``ledger.domain``,
write the outcome with a compare-and-set on the operation's ``version`` column, append the
events, commit. A lost compare-and-set (another writer got there first) or a unique-key race
on PostgreSQL retries the whole transaction against the fresh rows, so two concurrent
dispatches of one operation produce exactly one ``go``.

The values it takes and answers are in :mod:`ledger.writer.values`; holds are opened, closed and
decided on by :mod:`ledger.writer.holds`, always inside a transaction run here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ledger import domain
from ledger.domain import FailOutcome, IllegalTransition, NewHold, Reason
from ledger.domain.hashing import input_hash as hash_input
from ledger.domain.hashing import is_valid_hash
from ledger.faults import crashpoint
from ledger.storage.engine import CHECKPOINT_EVERY, WAL_RESET_AFFECTED, Store
from ledger.writer import outbox, records
from ledger.writer.holds import close_holds, require_operation, resolution_work, update_work
from ledger.writer.holds import open_holds as open_hold_rows
from ledger.writer.tx import Tx
from ledger.writer.values import (
    Answer,
    Clock,
    DispatchInput,
    HoldTarget,
    InvalidInput,
    NotFound,
    Outcome,
    check_id,
    check_optional,
    utcnow,
)

__all__ = [
    "Answer",
    "Clock",
    "DispatchInput",
    "HoldTarget",
    "InvalidInput",
    "Ledger",
    "NotFound",
    "Outcome",
    "Tx",
    "utcnow",
]
log = logging.getLogger(__name__)
T = TypeVar("T")


class _BatchAborted(Exception):
    """The server aborted a batch's transaction to break a deadlock: run it all again."""


def _aborted_by_server(exc: BaseException) -> bool:
    """A PostgreSQL serialization failure or deadlock."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) in ("40001", "40P01")


class Ledger:
    """The ledger's services over one store. ``clock`` is injectable for tests."""

    def __init__(
        self,
        store: Store,
        *,
        secret: bytes | None = None,
        max_attempts: int = domain.DEFAULT_MAX_ATTEMPTS,
        dispatch_deadline: timedelta = domain.DEFAULT_DISPATCH_DEADLINE,
        hold_deadlines: domain.HoldDeadlines = domain.HoldDeadlines(),
        clock: Clock = utcnow,
        retries: int = 20,
        alert_urls: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.secret = secret
        self.max_attempts = max_attempts
        self.dispatch_deadline = dispatch_deadline
        self.hold_deadlines = hold_deadlines
        self.clock = clock
        self.retries = retries
        self.alert_targets = sorted(outbox.targets_of(alert_urls))
        self._commits = 0
        self._dbapi = store.engine.dialect.dbapi

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self, actor: str) -> Iterator[Tx]:
        """One write transaction; events are appended just before the commit. Runs on the
        driver's connection straight from the pool: SQLAlchemy's per-transaction machinery
        costs more than the statements of a dispatch."""
        tx = Tx(
            self.store.engine,
            self.store.engine.raw_connection(),
            self.clock().astimezone(UTC),
            actor,
            self.store.chain_hint,
        )
        try:
            tx.begin()
            yield tx
            tx.append_events()
            crashpoint("before_commit")
            tx.commit()
        except BaseException:
            tx.rollback()
            raise
        finally:
            tx.close()
        self._commits += 1
        if WAL_RESET_AFFECTED and self._commits % CHECKPOINT_EVERY == 0:
            try:
                self.store.checkpoint()
            except Exception:  # committed already; a busy checkpoint is tried again later
                log.warning("WAL checkpoint failed; the next one will try again", exc_info=True)

    def run(self, actor: str, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in a transaction, again from the start when it lost a race: a lost
        compare-and-set, a unique key another writer took first, or (PostgreSQL) a
        serialization failure or deadlock."""
        for attempt in range(self.retries):
            last = attempt + 1 >= self.retries
            try:
                with self.transaction(actor) as tx:
                    return work(tx)
            except records.Conflict:
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

    def run_many(self, units: Sequence[tuple[str, Callable[[Tx], Any]]]) -> list[Outcome]:
        """Run several units of work in ONE transaction (one commit, one fsync), each inside
        its own SAVEPOINT: a unit that raises rolls back only its own writes and events, and
        its error is returned in its :class:`Outcome`. When the transaction itself fails
        (the commit, the chain append, a broken connection) every unit gets that error:
        nothing of the batch is durable, so no caller may answer as if it were.

        A deadlock or serialization failure (PostgreSQL, two batches locking the same
        operations in opposite orders) runs the whole batch again: retrying only the unit
        would wait again on a lock the other batch cannot release while this one keeps the
        locks of its earlier units."""
        for attempt in range(self.retries):
            outcomes: list[Outcome] = []
            try:
                with self.transaction("batch") as tx:
                    for actor, work in units:
                        outcomes.append(self._run_unit(tx, actor, work))
                    crashpoint("batch_before_commit")
            except Exception as exc:
                aborted = isinstance(exc, _BatchAborted) or _aborted_by_server(exc)
                if aborted and attempt + 1 < self.retries:
                    continue
                return [Outcome(error=exc) for _ in units]
            crashpoint("batch_after_commit")
            return outcomes
        raise RuntimeError("unreachable")

    def _run_unit(self, tx: Tx, actor: str, work: Callable[[Tx], Any]) -> Outcome:
        for attempt in range(self.retries):
            tx.actor = actor
            mark = len(tx.events)
            tx.execute("SAVEPOINT flowledger_unit")
            try:
                value = work(tx)
            except Exception as exc:
                if _aborted_by_server(exc):
                    raise _BatchAborted from exc  # the whole transaction rolls back
                tx.execute("ROLLBACK TO SAVEPOINT flowledger_unit")
                tx.execute("RELEASE SAVEPOINT flowledger_unit")
                del tx.events[mark:]
                lost = isinstance(exc, records.Conflict) or self._lost_race(exc)
                if lost and attempt + 1 < self.retries:
                    continue
                return Outcome(error=exc)
            tx.execute("RELEASE SAVEPOINT flowledger_unit")
            return Outcome(value=value)
        raise RuntimeError("unreachable")

    # ------------------------------------------------------------------ workflow calls

    def input_hash_of(self, value: Any) -> str:
        try:
            return hash_input(value, self.secret)
        except ValueError as exc:
            raise InvalidInput(
                "input holds a value JSON cannot carry (NaN or infinity)", "input"
            ) from exc

    def _resolve_hash(self, has_input: bool, value: Any, given: str | None) -> str:
        if has_input and given is not None:
            raise InvalidInput("give input or input_hash, not both", "input_hash")
        if has_input:
            return self.input_hash_of(value)
        if given is None:
            raise InvalidInput("input or input_hash is required", "input")
        if not is_valid_hash(given):
            raise InvalidInput(
                "input_hash must be sha256:<64 hex> or hmac-sha256:<64 hex>", "input_hash"
            )
        return given

    def dispatch(self, operation_id: str, req: DispatchInput, *, actor: str) -> Answer:
        """Decide whether a workflow may write now; ``go`` is returned only after the
        ``dispatching`` state is committed."""
        return self.run(actor, self.dispatch_work(operation_id, req))

    def dispatch_work(self, operation_id: str, req: DispatchInput) -> Callable[[Tx], Answer]:
        """Check the request now, before any transaction, and return the dispatch as a unit
        of work for :meth:`run` or :meth:`run_many`."""
        check_id(operation_id, "operation_id")
        check_id(req.execution_id, "execution_id")
        check_id(req.processing_version, "processing_version")
        check_optional(
            {
                "workflow_id": req.workflow_id,
                "step": req.step,
                "source": req.source,
                "input_ref": req.input_ref,
                "approval_version": req.approval.version if req.approval else None,
            }
        )
        if req.run_index is not None and not 0 <= req.run_index < 2**31:
            raise InvalidInput("run_index must be between 0 and 2^31-1", "run_index")
        request = domain.DispatchRequest(
            input_hash=self._resolve_hash(req.has_input, req.input, req.input_hash),
            processing_version=req.processing_version,
            execution_id=req.execution_id,
            run_index=req.run_index,
            deadline=req.deadline,
            approval=req.approval,
        )
        return lambda tx: self._dispatch(tx, operation_id, req, request)

    def _dispatch(
        self,
        tx: Tx,
        operation_id: str,
        req: DispatchInput,
        request: domain.DispatchRequest,
    ) -> Answer:
        row, holds = records.load_with_holds(tx, operation_id)
        op = records.to_domain(row) if row is not None else None
        change = domain.dispatch(
            op,
            request,
            holds,
            tx.now,
            operation_id=operation_id,
            max_attempts=self.max_attempts,
            default_deadline=self.dispatch_deadline,
        )
        crashpoint("before_dispatch_write")
        extra = {
            "workflow_id": req.workflow_id,
            "step": req.step,
            "source": req.source,
            "input_ref": req.input_ref,
            "approval_version": req.approval.version if req.approval else None,
            "approval_expires_at": req.approval.expires_at if req.approval else None,
        }
        if change.operation is not None:
            records.save_operation(tx, row, change.operation, extra)
        if change.new_attempt:
            assert change.operation is not None
            records.insert_attempt(tx, change.operation, extra)
        hold_ids = [
            self._open(tx, operation_id, h, execution_id=req.execution_id) for h in change.holds
        ]
        if change.event is not None:
            data = {
                "decision": change.decision.value if change.decision else None,
                "execution_id": req.execution_id,
                "run_index": req.run_index,
                "input_hash": request.input_hash,
                "processing_version": request.processing_version,
                **change.data,
            }
            if change.reason is not None:
                data["reason"] = change.reason.value
            tx.event(change.event, operation_id, data)
        final = change.operation or op
        assert final is not None and change.decision is not None
        return Answer(
            operation_id,
            final.state.value,
            change.decision.value,
            final.attempt,
            change.reason.value if change.reason else None,
            change.receipt,
            [h for h in hold_ids if h is not None],
        )

    def prepare(self, operation_id: str, *, actor: str, **fields: Any) -> Answer:
        """Record the input and version without claiming; ``fields`` as :meth:`prepare_work`."""
        return self.run(actor, self.prepare_work(operation_id, **fields))

    def prepare_work(
        self,
        operation_id: str,
        *,
        processing_version: str,
        input: Any = None,
        has_input: bool = False,
        input_hash: str | None = None,
        workflow_id: str | None = None,
        step: str | None = None,
        source: str | None = None,
        input_ref: str | None = None,
    ) -> Callable[[Tx], Answer]:
        """Record the input and version without claiming the operation."""
        check_id(operation_id, "operation_id")
        check_id(processing_version, "processing_version")
        digest = self._resolve_hash(has_input, input, input_hash)
        check_optional(
            {"workflow_id": workflow_id, "step": step, "source": source, "input_ref": input_ref}
        )
        extra = {"workflow_id": workflow_id, "step": step, "source": source, "input_ref": input_ref}

        def work(tx: Tx) -> Answer:
            row = records.load_operation(tx, operation_id)
            op = records.to_domain(row) if row is not None else None
            change = domain.prepare(
                op,
                digest,
                processing_version,
                operation_id=operation_id,
                max_attempts=self.max_attempts,
            )
            if change.operation is not None:
                records.save_operation(tx, row, change.operation, extra)
                tx.event(
                    "prepared",
                    operation_id,
                    {"input_hash": digest, "processing_version": processing_version},
                )
            final = change.operation or op
            assert final is not None
            return Answer(operation_id, final.state.value, attempt=final.attempt)

        return work

    def confirm(
        self,
        operation_id: str,
        receipt: str,
        *,
        execution_id: str | None = None,
        detail: str | None = None,
        actor: str,
    ) -> Answer:
        """The workflow reports the target's receipt for its write."""
        return self.run(
            actor,
            self.confirm_work(operation_id, receipt, execution_id=execution_id, detail=detail),
        )

    def confirm_work(
        self,
        operation_id: str,
        receipt: str,
        *,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> Callable[[Tx], Answer]:
        check_id(operation_id, "operation_id")
        if not isinstance(receipt, str) or not receipt.strip() or len(receipt) > 1000:
            raise InvalidInput("receipt must be 1 to 1000 characters", "receipt")
        check_optional({"execution_id": execution_id})
        if detail is not None and len(detail) > 4000:
            raise InvalidInput("detail must be at most 4000 characters", "detail")
        return lambda tx: self._confirm(tx, operation_id, receipt, execution_id, detail)

    def _confirm(
        self,
        tx: Tx,
        operation_id: str,
        receipt: str,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> Answer:
        row, holds = records.load_with_holds(tx, operation_id)
        if row is None:
            raise NotFound(f"no operation {operation_id!r}")
        op = records.to_domain(row)
        change = domain.confirm(op, receipt, holds)
        hold_ids = [
            self._open(tx, operation_id, h, execution_id=execution_id) for h in change.holds
        ]
        if change.operation is not None:
            records.save_operation(tx, row, change.operation)
            records.end_attempt(tx, operation_id, op.attempt, "confirmed")
            crashpoint("after_confirm_update")
        if change.event is not None:
            records.insert_receipt(
                tx,
                operation_id,
                op.attempt,
                receipt,
                kind="conflict" if change.holds else "workflow",
                execution_id=execution_id,
                detail=detail,
            )
            close_holds(tx, change, operation_id, note="confirmed by the workflow")
            tx.event(
                change.event,
                operation_id,
                {"receipt": receipt, "execution_id": execution_id, **change.data},
            )
        final = change.operation or op
        return Answer(
            operation_id,
            final.state.value,
            attempt=final.attempt,
            receipt=final.receipt,
            reason=Reason.RECEIPT_CONFLICT.value if change.holds else None,
            hold_ids=[h for h in hold_ids if h is not None],
        )

    def fail(
        self,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        *,
        execution_id: str | None = None,
        actor: str,
    ) -> Answer:
        """The workflow reports that its write was rejected, or that it cannot tell."""
        return self.run(
            actor, self.fail_work(operation_id, outcome, error, execution_id=execution_id)
        )

    def fail_work(
        self,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        *,
        execution_id: str | None = None,
    ) -> Callable[[Tx], Answer]:
        check_id(operation_id, "operation_id")
        check_optional({"execution_id": execution_id})
        return lambda tx: self._fail(tx, operation_id, outcome, error, execution_id)

    def _fail(
        self,
        tx: Tx,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        execution_id: str | None = None,
    ) -> Answer:
        error = (error or "")[:2000]
        op, row = require_operation(tx, operation_id)
        change = domain.fail(op, outcome, error or f"the workflow reported {outcome.value}")
        # Unknown leaves the operation as it is but opens a hold: compare-and-set it anyway, so
        # a confirm that committed since our read makes this run again (and refuse).
        records.save_operation(tx, row, change.operation or op)
        if change.operation is not None:
            records.end_attempt(tx, operation_id, op.attempt, "rejected", error)
        hold_ids = [
            self._open(tx, operation_id, h, execution_id=execution_id) for h in change.holds
        ]
        tx.event(
            change.event or "failed",
            operation_id,
            {"execution_id": execution_id, "error": error, **change.data},
        )
        final = change.operation or op
        return Answer(
            operation_id,
            final.state.value,
            attempt=final.attempt,
            reason=change.holds[0].reason.value if change.holds else None,
            hold_ids=[h for h in hold_ids if h is not None],
        )

    def execution_failed_work(
        self, execution_id: str, detail: str
    ) -> Callable[[Tx], list[tuple[str, int | None]]]:
        """A workflow execution errored: open a blocking ``execution_failed`` hold on every
        operation it left ``dispatching`` (whose current attempt it made). Returns
        ``(operation_id, hold_id or None when that cause already had one)`` pairs."""
        check_id(execution_id, "execution_id")

        def work(tx: Tx) -> list[tuple[str, int | None]]:
            ops = [
                records.to_domain(r) for r in records.dispatching_for_execution(tx, execution_id)
            ]
            targets = [
                HoldTarget(
                    domain.execution_failed_hold(op, execution_id, detail),
                    op.operation_id,
                    execution_id=execution_id,
                )
                for op in ops
            ]
            ids = self.open_holds(tx, targets)
            return [(op.operation_id, i) for op, i in zip(ops, ids, strict=True)]

        return work

    # ------------------------------------------------------------------ holds

    def open_hold(
        self,
        hold: NewHold,
        *,
        operation_id: str | None = None,
        execution_id: str | None = None,
        source: str | None = None,
        actor: str,
    ) -> int | None:
        """Open a hold unless one with its cause key exists. Returns its id, or ``None`` when
        the cause already had one."""
        return self.run(
            actor,
            lambda tx: self._open(tx, operation_id, hold, execution_id=execution_id, source=source),
        )

    def _open(
        self,
        tx: Tx,
        operation_id: str | None,
        hold: NewHold,
        *,
        execution_id: str | None = None,
        source: str | None = None,
    ) -> int | None:
        return self.open_holds(tx, [HoldTarget(hold, operation_id, execution_id, source)])[0]

    def open_holds(self, tx: Tx, targets: Sequence[HoldTarget]) -> list[int | None]:
        """Open each hold whose cause key has none yet, in the caller's transaction, with this
        ledger's deadlines and alert targets (:func:`ledger.writer.holds.open_holds`)."""
        return open_hold_rows(tx, targets, self.hold_deadlines, self.alert_targets)

    def resolve(
        self,
        hold_id: int,
        action: str,
        *,
        note: str,
        operator: str,
        receipt: str | None = None,
    ) -> Answer | None:
        """A person's decision on a hold: ``confirm`` (with a receipt), ``release``,
        ``cancel`` or ``dismiss``. Every one needs a note and is recorded with the operator."""
        work = resolution_work(hold_id, action, note, receipt)
        check_id(operator, "operator")
        return self.run(f"operator:{operator}", work)

    def update_hold(
        self,
        hold_id: int,
        *,
        operator: str,
        note: str,
        owner: str | None = None,
        deadline: datetime | None = None,
        next_action: str | None = None,
    ) -> None:
        """Assign, extend the deadline, set the next action, or just add a note."""
        note = note.strip()
        if not note:
            raise IllegalTransition("a note is required", code="note_required")
        check_id(operator, "operator")
        if owner is not None:
            check_id(owner, "owner")
        work = update_work(hold_id, note, owner=owner, deadline=deadline, next_action=next_action)
        self.run(f"operator:{operator}", work)
