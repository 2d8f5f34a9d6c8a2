"""The only writer: every change to operations, attempts, receipts and holds goes through here,
with its event, in one transaction.

Each public method runs one transaction: read the rows the rule needs, ask ``ledger.domain``,
write the outcome with a compare-and-set on the operation's ``version`` column, append the
events, commit. A lost compare-and-set (another writer got there first) or a unique-key race
on PostgreSQL retries the whole transaction against the fresh rows, so two concurrent
dispatches of one operation produce exactly one ``go``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa

from ledger import chain, domain
from ledger.domain import (
    Change,
    Decision,
    FailOutcome,
    IllegalTransition,
    NewHold,
    OpenHold,
    Reason,
    State,
)
from ledger.faults import crashpoint
from ledger.hashing import input_hash as hash_input
from ledger.hashing import is_valid_hash
from ledger.models import Attempt, Hold, Operation, Receipt, table
from ledger.storage import CHECKPOINT_EVERY, WAL_RESET_AFFECTED, Store

OPS = table(Operation)
ATTEMPTS = table(Attempt)
RECEIPTS = table(Receipt)
HOLDS = table(Hold)

T = TypeVar("T")
Clock = Callable[[], datetime]
_PRINTABLE_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


class NotFound(LookupError):
    """The operation or hold named does not exist."""


class InvalidInput(ValueError):
    """A value the ledger refuses; ``field`` names it for the caller."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Outcome:
    """What one unit of a :meth:`Ledger.run_many` batch returned, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


class _Conflict(Exception):
    """Another writer changed the row between our read and our write: run again."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_id(value: str, field: str) -> str:
    if not isinstance(value, str) or not _PRINTABLE_ID.match(value):
        raise InvalidInput(
            f"{field} must be 1 to {domain.MAX_ID_LENGTH} printable characters", field
        )
    return value


@dataclass(frozen=True)
class DispatchInput:
    """What a workflow sends before its write."""

    processing_version: str
    execution_id: str
    input: Any = None
    input_hash: str | None = None
    has_input: bool = False
    workflow_id: str | None = None
    step: str | None = None
    run_index: int | None = None
    source: str | None = None
    deadline: datetime | None = None
    approval: domain.Approval | None = None
    input_ref: str | None = None


@dataclass(frozen=True)
class Answer:
    """What the ledger tells a workflow."""

    operation_id: str
    state: str
    decision: str | None = None
    attempt: int = 0
    reason: str | None = None
    receipt: str | None = None
    hold_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "decision": self.decision,
            "state": self.state,
            "attempt": self.attempt,
            "reason": self.reason,
            "receipt": self.receipt,
        }


class Tx:
    """One write transaction: the connection, the time it runs at, who acts, and the events
    to append just before commit."""

    def __init__(self, conn: sa.Connection, now: datetime, actor: str) -> None:
        self.conn = conn
        self.now = now
        self.actor = actor
        self.events: list[chain.PendingEvent] = []

    def event(
        self, kind: str, operation_id: str | None, data: dict[str, Any], hold_id: int | None = None
    ) -> None:
        self.events.append(
            chain.PendingEvent(self.now, self.actor, kind, operation_id, hold_id, data)
        )


class Ledger:
    """The ledger's services over one store. ``clock`` is injectable for tests."""

    def __init__(
        self,
        store: Store,
        *,
        secret: bytes | None = None,
        max_attempts: int = domain.DEFAULT_MAX_ATTEMPTS,
        dispatch_deadline: timedelta = domain.DEFAULT_DISPATCH_DEADLINE,
        clock: Clock = utcnow,
        retries: int = 20,
    ) -> None:
        self.store = store
        self.secret = secret
        self.max_attempts = max_attempts
        self.dispatch_deadline = dispatch_deadline
        self.clock = clock
        self.retries = retries
        self._commits = 0

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def transaction(self, actor: str) -> Iterator[Tx]:
        """One write transaction; events are appended just before the commit."""
        with self.store.engine.begin() as conn:
            tx = Tx(conn, self.clock().astimezone(UTC), actor)
            yield tx
            chain.append(conn, tx.events)
            crashpoint("before_commit")
        self._commits += 1
        if WAL_RESET_AFFECTED and self._commits % CHECKPOINT_EVERY == 0:
            self.store.checkpoint()

    def run(self, actor: str, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in a transaction, again from the start when it lost a race."""
        for attempt in range(self.retries):
            try:
                with self.transaction(actor) as tx:
                    return work(tx)
            except _Conflict:
                continue
            except sa.exc.IntegrityError:
                if attempt + 1 >= self.retries:
                    raise
                continue
            except sa.exc.OperationalError as exc:
                # PostgreSQL: serialization failure / deadlock detected -> run again.
                code = getattr(getattr(exc, "orig", None), "sqlstate", None)
                if code in ("40001", "40P01") and attempt + 1 < self.retries:
                    continue
                raise
        raise RuntimeError("the transaction kept losing races; giving up")

    def run_many(self, units: Sequence[tuple[str, Callable[[Tx], Any]]]) -> list[Outcome]:
        """Run several units of work in ONE transaction (one commit, one fsync), each inside
        its own SAVEPOINT: a unit that raises rolls back only its own writes and events, and
        its error is returned in its :class:`Outcome`. When the transaction itself fails
        (the commit, the chain append, a broken connection) every unit gets that error:
        nothing of the batch is durable, so no caller may answer as if it were."""
        outcomes: list[Outcome] = []
        try:
            with self.transaction("batch") as outer:
                for actor, work in units:
                    outcomes.append(self._run_unit(outer, actor, work))
                crashpoint("batch_before_commit")
        except Exception as exc:
            return [Outcome(error=exc) for _ in units]
        crashpoint("batch_after_commit")
        return outcomes

    def _run_unit(self, outer: Tx, actor: str, work: Callable[[Tx], Any]) -> Outcome:
        for attempt in range(self.retries):
            tx = Tx(outer.conn, outer.now, actor)
            savepoint = outer.conn.begin_nested()
            try:
                value = work(tx)
            except (_Conflict, sa.exc.IntegrityError) as exc:
                savepoint.rollback()
                if attempt + 1 >= self.retries:
                    return Outcome(error=exc)
                continue
            except Exception as exc:
                savepoint.rollback()
                return Outcome(error=exc)
            savepoint.commit()
            outer.events.extend(tx.events)
            return Outcome(value=value)
        raise AssertionError("unreachable")

    def execution_failed_work(self, execution_id: str, detail: str) -> Callable[[Tx], list[Any]]:
        """A workflow execution errored: open a blocking ``execution_failed`` hold on every
        operation it left ``dispatching`` (whose current attempt it made). Returns
        ``(operation_id, hold_id or None when that cause already had one)`` pairs."""
        check_id(execution_id, "execution_id")

        def work(tx: Tx) -> list[Any]:
            rows = tx.conn.execute(
                sa.select(OPS)
                .where(OPS.c.state == State.DISPATCHING.value, OPS.c.execution_id == execution_id)
                .order_by(OPS.c.operation_id)
            ).all()
            opened = []
            for row in rows:
                op = _to_domain(row)
                hold = domain.execution_failed_hold(op, execution_id, detail)
                hold_id = self._open(tx, op.operation_id, hold, execution_id=execution_id)
                opened.append((op.operation_id, hold_id))
            return opened

        return work

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
        return self.run(actor, self.dispatch_work(operation_id, req))

    def dispatch_work(self, operation_id: str, req: DispatchInput) -> Callable[[Tx], Answer]:
        """Check the request now and return the dispatch as a unit of work, for ``run`` or
        ``run_many``."""
        check_id(operation_id, "operation_id")
        check_id(req.execution_id, "execution_id")
        check_id(req.processing_version, "processing_version")
        digest = self._resolve_hash(req.has_input, req.input, req.input_hash)
        request = domain.DispatchRequest(
            input_hash=digest,
            processing_version=req.processing_version,
            execution_id=req.execution_id,
            run_index=req.run_index,
            deadline=req.deadline,
            approval=req.approval,
        )
        return lambda tx: self._dispatch(tx, operation_id, req, request)

    def _dispatch(
        self, tx: Tx, operation_id: str, req: DispatchInput, request: domain.DispatchRequest
    ) -> Answer:
        row = _load(tx.conn, operation_id)
        op = _to_domain(row) if row is not None else None
        holds = _open_holds(tx.conn, operation_id) if op is not None else []
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
        if change.operation is not None:
            extra = {
                "workflow_id": req.workflow_id,
                "step": req.step,
                "source": req.source,
                "input_ref": req.input_ref,
                "approval_version": req.approval.version if req.approval else None,
                "approval_expires_at": req.approval.expires_at if req.approval else None,
            }
            _save(tx, row, change.operation, extra)
        if change.new_attempt:
            assert change.operation is not None
            tx.conn.execute(
                ATTEMPTS.insert(),
                {
                    "operation_id": operation_id,
                    "number": change.operation.attempt,
                    "execution_id": req.execution_id,
                    "run_index": req.run_index,
                    "workflow_id": req.workflow_id,
                    "step": req.step,
                    "source": req.source,
                    "dispatched_at": tx.now,
                    "deadline": change.operation.deadline,
                },
            )
        hold_ids = [
            self._open(tx, operation_id, h, execution_id=req.execution_id) for h in change.holds
        ]
        if change.event is not None:
            data = {
                "decision": change.decision,
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
        assert final is not None
        return Answer(
            operation_id,
            final.state.value,
            (change.decision or Decision.GO).value,
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
        check_id(operation_id, "operation_id")
        check_id(processing_version, "processing_version")
        digest = self._resolve_hash(has_input, input, input_hash)

        def work(tx: Tx) -> Answer:
            row = _load(tx.conn, operation_id)
            op = _to_domain(row) if row is not None else None
            change = domain.prepare(
                op,
                digest,
                processing_version,
                operation_id=operation_id,
                max_attempts=self.max_attempts,
            )
            if change.operation is not None:
                _save(
                    tx,
                    row,
                    change.operation,
                    {
                        "workflow_id": workflow_id,
                        "step": step,
                        "source": source,
                        "input_ref": input_ref,
                    },
                )
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

        def work(tx: Tx) -> Answer:
            op, row = self._require(tx, operation_id)
            holds = _open_holds(tx.conn, operation_id)
            change = domain.confirm(op, receipt, holds)
            hold_ids = [
                self._open(tx, operation_id, h, execution_id=execution_id) for h in change.holds
            ]
            if change.operation is not None:
                _save(tx, row, change.operation)
                _end_attempt(tx, operation_id, op.attempt, "confirmed")
                crashpoint("after_confirm_update")
            if change.event is not None:
                kind = "conflict" if change.holds else "workflow"
                tx.conn.execute(
                    RECEIPTS.insert(),
                    {
                        "operation_id": operation_id,
                        "attempt": op.attempt,
                        "receipt": receipt,
                        "execution_id": execution_id,
                        "confirmed_at": tx.now,
                        "confirmed_by": tx.actor,
                        "kind": kind,
                        "detail": detail,
                    },
                )
                self._resolve(tx, change, operation_id, note="confirmed by the workflow")
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

        return work

    def fail(
        self,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        *,
        execution_id: str | None = None,
        actor: str,
    ) -> Answer:
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
        error = (error or "")[:2000]

        def work(tx: Tx) -> Answer:
            op, row = self._require(tx, operation_id)
            change = domain.fail(op, outcome, error or f"the workflow reported {outcome.value}")
            if change.operation is not None:
                _save(tx, row, change.operation)
                _end_attempt(tx, operation_id, op.attempt, "rejected", error)
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
        exists = tx.conn.execute(
            sa.select(HOLDS.c.id).where(HOLDS.c.cause_key == hold.cause_key)
        ).first()
        if exists is not None:
            return None
        inserted = tx.conn.execute(
            HOLDS.insert().values(
                cause_key=hold.cause_key,
                reason=hold.reason.value,
                blocking=hold.blocking,
                operation_id=operation_id,
                execution_id=execution_id,
                source=source,
                detail=hold.detail[:2000],
                opened_at=tx.now,
                deadline=domain.hold_deadline(tx.now, hold.reason),
            )
        ).inserted_primary_key
        assert inserted is not None
        hold_id = int(inserted[0])
        tx.event(
            "hold_opened",
            operation_id,
            {
                "reason": hold.reason.value,
                "blocking": hold.blocking,
                "detail": hold.detail[:2000],
                "execution_id": execution_id,
                "source": source,
            },
            hold_id=hold_id,
        )
        return hold_id

    def _resolve(self, tx: Tx, change: Change, operation_id: str | None, note: str) -> None:
        for hold_id in change.resolve_holds:
            done = tx.conn.execute(
                HOLDS.update()
                .where(HOLDS.c.id == hold_id, HOLDS.c.resolved_at.is_(None))
                .values(
                    resolved_at=tx.now,
                    resolved_by=tx.actor,
                    resolution=change.resolution.value if change.resolution else None,
                    resolution_note=note,
                    version=HOLDS.c.version + 1,
                )
            )
            if done.rowcount == 1:
                tx.event(
                    "hold_resolved",
                    operation_id,
                    {
                        "resolution": change.resolution.value if change.resolution else None,
                        "note": note,
                        **({"receipt": change.receipt} if change.receipt else {}),
                    },
                    hold_id=hold_id,
                )

    def _hold_and_op(
        self, tx: Tx, hold_id: int
    ) -> tuple[OpenHold, Any, list[OpenHold], domain.Operation | None, Any]:
        row = tx.conn.execute(sa.select(HOLDS).where(HOLDS.c.id == hold_id)).first()
        if row is None:
            raise NotFound(f"no hold {hold_id}")
        if row.resolved_at is not None:
            raise IllegalTransition(
                f"hold {hold_id} was already resolved by {row.resolved_by} "
                f"({row.resolution}) at {row.resolved_at:%Y-%m-%d %H:%M:%S} UTC",
                code="already_resolved",
            )
        hold = OpenHold(row.id, Reason(row.reason), row.blocking, row.cause_key)
        if row.operation_id is None:
            return hold, row, [hold], None, None
        op, op_row = self._require(tx, row.operation_id)
        return hold, row, _open_holds(tx.conn, row.operation_id), op, op_row

    def resolve(
        self, hold_id: int, action: str, *, note: str, operator: str, receipt: str | None = None
    ) -> Answer | None:
        """A person's decision on a hold: ``confirm`` (with a receipt), ``release``,
        ``cancel`` or ``dismiss``. Every one needs a note and is recorded with the operator."""
        actor = f"operator:{operator}"

        def work(tx: Tx) -> Answer | None:
            hold, _, holds, op, op_row = self._hold_and_op(tx, hold_id)
            if action == "dismiss":
                change = domain.dismiss(hold, note)
            elif op is None:
                raise IllegalTransition(
                    f"hold {hold_id} concerns no operation; dismiss it once handled"
                )
            elif action == "confirm":
                change = domain.confirm_with_evidence(op, hold, holds, receipt or "", note)
            elif action == "release":
                change = domain.release_for_retry(op, hold, holds, note)
            elif action == "cancel":
                change = domain.cancel(op, holds, note)
            else:
                raise InvalidInput(f"unknown action {action!r}", "action")
            operation_id = op.operation_id if op is not None else None
            if op is not None and change.operation is not None:
                _save(tx, op_row, change.operation)
                if action in ("confirm", "release"):
                    _end_attempt(
                        tx,
                        op.operation_id,
                        op.attempt,
                        "confirmed" if action == "confirm" else "released",
                    )
            if action == "confirm" and op is not None:
                tx.conn.execute(
                    RECEIPTS.insert().values(
                        operation_id=op.operation_id,
                        attempt=op.attempt,
                        receipt=receipt,
                        confirmed_at=tx.now,
                        confirmed_by=tx.actor,
                        kind="evidence",
                        detail=note,
                    )
                )
            self._resolve(tx, change, operation_id, note.strip())
            if op is None:
                return None
            final = change.operation or op
            return Answer(
                op.operation_id, final.state.value, attempt=final.attempt, receipt=final.receipt
            )

        return self.run(actor, work)

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

        def work(tx: Tx) -> None:
            hold, row, _, _, _ = self._hold_and_op(tx, hold_id)
            values: dict[str, Any] = {"version": HOLDS.c.version + 1}
            data: dict[str, Any] = {"note": note}
            if owner is not None:
                values["owner"] = check_id(owner, "owner")
                data["owner"] = owner
            if deadline is not None:
                if deadline <= tx.now:
                    raise InvalidInput("the new deadline is in the past", "deadline")
                values["deadline"] = deadline
                data["deadline"] = deadline.astimezone(UTC).isoformat()
            if next_action is not None:
                values["next_action"] = next_action[:1000]
                data["next_action"] = next_action[:1000]
            done = tx.conn.execute(
                HOLDS.update()
                .where(
                    HOLDS.c.id == hold_id,
                    HOLDS.c.version == row.version,
                    HOLDS.c.resolved_at.is_(None),
                )
                .values(**values)
            )
            if done.rowcount != 1:
                raise _Conflict()
            kind = (
                "hold_assigned"
                if owner is not None
                else "hold_extended"
                if deadline is not None
                else "hold_noted"
            )
            tx.event(kind, row.operation_id, data, hold_id=hold.hold_id)

        self.run(f"operator:{operator}", work)

    # ------------------------------------------------------------------ helpers

    def _require(self, tx: Tx, operation_id: str) -> tuple[domain.Operation, Any]:
        row = _load(tx.conn, operation_id)
        if row is None:
            raise NotFound(f"no operation {operation_id!r}")
        return _to_domain(row), row


_LOAD = sa.select(OPS).where(OPS.c.operation_id == sa.bindparam("op_id"))
_OPEN_HOLDS = (
    sa.select(HOLDS.c.id, HOLDS.c.reason, HOLDS.c.blocking, HOLDS.c.cause_key)
    .where(HOLDS.c.operation_id == sa.bindparam("op_id"), HOLDS.c.resolved_at.is_(None))
    .order_by(HOLDS.c.id)
)
_END_ATTEMPT = ATTEMPTS.update().where(
    ATTEMPTS.c.operation_id == sa.bindparam("op_id"), ATTEMPTS.c.number == sa.bindparam("n")
)


def _load(conn: sa.Connection, operation_id: str) -> Any:
    return conn.execute(_LOAD, {"op_id": operation_id}).first()


def _to_domain(row: Any) -> domain.Operation:
    return domain.Operation(
        operation_id=row.operation_id,
        state=State(row.state),
        input_hash=row.input_hash,
        processing_version=row.processing_version,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        execution_id=row.execution_id,
        run_index=row.run_index,
        receipt=row.receipt,
        deadline=row.deadline,
        version=row.version,
    )


def _open_holds(conn: sa.Connection, operation_id: str) -> list[OpenHold]:
    rows = conn.execute(_OPEN_HOLDS, {"op_id": operation_id}).all()
    return [OpenHold(r.id, Reason(r.reason), bool(r.blocking), r.cause_key) for r in rows]


# Built once: executing a prepared statement with a parameter dict skips SQLAlchemy's
# per-call statement construction, which dominated the writer's time under load.
_COMPARE_AND_SET = (
    OPS.update()
    .where(
        OPS.c.operation_id == sa.bindparam("cas_id"),
        OPS.c.version == sa.bindparam("cas_version"),
        OPS.c.state == sa.bindparam("cas_state"),
    )
    .values(version=OPS.c.version + 1)
)


def _save(tx: Tx, row: Any, op: domain.Operation, extra: dict[str, Any] | None = None) -> None:
    """Insert a new operation, or compare-and-set an existing one on its ``version``."""
    values = {
        "state": op.state.value,
        "attempt": op.attempt,
        "execution_id": op.execution_id,
        "run_index": op.run_index,
        "receipt": op.receipt,
        "deadline": op.deadline,
        "updated_at": tx.now,
    }
    if row is None:
        tx.conn.execute(
            OPS.insert(),
            {
                "operation_id": op.operation_id,
                "input_hash": op.input_hash,
                "processing_version": op.processing_version,
                "max_attempts": op.max_attempts,
                "version": 1,
                "created_at": tx.now,
                **values,
                **(extra or {}),
            },
        )
        return
    for key, value in (extra or {}).items():
        if value is not None:
            values[key] = value
    done = tx.conn.execute(
        _COMPARE_AND_SET,
        {"cas_id": op.operation_id, "cas_version": row.version, "cas_state": row.state, **values},
    )
    if done.rowcount != 1:
        raise _Conflict()


def _end_attempt(
    tx: Tx, operation_id: str, number: int, outcome: str, error: str | None = None
) -> None:
    tx.conn.execute(
        _END_ATTEMPT,
        {
            "op_id": operation_id,
            "n": number,
            "outcome": outcome,
            "ended_at": tx.now,
            "error": error or None,
        },
    )
