"""The services: every change to operations, attempts, receipts and holds goes through here,
with its event, in one transaction.

Each service checks its input at once (a bad value is refused before any transaction) and
returns a :class:`~flowledger.storage.unit_of_work.Call`: its work reads the rows the rule
needs, asks ``flowledger.domain``, writes the outcome with a compare-and-set on the
operation's ``version`` column and records the events. ``call.run(actor)`` runs it in a
transaction of its own; the receiver's group commit runs many ``call.work`` in one
(:mod:`flowledger.storage.unit_of_work`). A lost compare-and-set (another writer got there
first) or a unique-key race on PostgreSQL runs the work again against the fresh rows, so two
concurrent dispatches of one operation produce exactly one ``go``.

The values it takes and answers are in :mod:`flowledger.services.values`; holds are opened,
closed and decided on by :mod:`flowledger.services.holds`, always inside a transaction run
here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from flowledger import domain
from flowledger.clock import Clock, utcnow
from flowledger.domain import FailOutcome, IllegalTransition, NewHold, Reason
from flowledger.domain.hashing import input_hash as hash_input
from flowledger.domain.hashing import is_valid_hash
from flowledger.domain.limits import (
    MAX_DETAIL_LENGTH,
    MAX_ERROR_LENGTH,
    MAX_INPUT_REF_LENGTH,
    MAX_NEXT_ACTION_LENGTH,
    MAX_NOTE_LENGTH,
    MAX_RECEIPT_LENGTH,
)
from flowledger.domain.redact import NO_SECRETS, Secrets
from flowledger.faults import crashpoint
from flowledger.services import outbox
from flowledger.services.holds import close_holds, resolution_work, update_work
from flowledger.services.holds import open_holds as open_hold_rows
from flowledger.services.values import (
    Answer,
    DispatchInput,
    HoldTarget,
    InvalidInput,
    NotFound,
    check_detail,
    check_id,
    check_note,
    check_optional,
    check_receipt,
    check_run_index,
    operator_actor,
)
from flowledger.storage import operations as records
from flowledger.storage.engine import Store
from flowledger.storage.tx import Tx
from flowledger.storage.unit_of_work import Call, Outcome, UnitOfWork

__all__ = [
    "Answer",
    "Call",
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


class Ledger(UnitOfWork):
    """The ledger's services over one store. Each service checks its input and returns a
    :class:`~flowledger.storage.unit_of_work.Call`; ``clock`` is injectable for tests.

    Text that came from a workflow, a tool or a target (receipts, details, errors,
    ``input_ref``, notes) is checked as sent, then redacted (:meth:`redact`, ``secrets`` the
    configured ones) before anything is written: events are immutable. Ids and hashes are
    kept exact."""

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
        secrets: Secrets = NO_SECRETS,
    ) -> None:
        super().__init__(store, clock=clock, retries=retries, secrets=secrets)
        self.secret = secret
        self.max_attempts = max_attempts
        self.dispatch_deadline = dispatch_deadline
        self.hold_deadlines = hold_deadlines
        self.alert_targets = sorted(outbox.targets_of(alert_urls))

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

    def _redacted(self, text: str | None, longest: int) -> str | None:
        """``text`` redacted, and cut to the limit it was checked against (``[redacted]`` is
        longer than a short secret)."""
        return None if text is None else self.redact(text)[:longest]

    def _redact_receipt(self, receipt: str) -> str:
        """A receipt is the target's reference and stays exact, unless it holds a secret (a
        receipt that *is* a configured secret is still one)."""
        return self.redact(receipt)[:MAX_RECEIPT_LENGTH]

    # ------------------------------------------------------------------ workflow calls

    def dispatch(self, operation_id: str, req: DispatchInput) -> Call[Answer]:
        """May a workflow write now? ``go`` is answered only after the ``dispatching`` state
        is committed."""
        check_id(operation_id, "operation_id")
        check_id(req.execution_id, "execution_id")
        check_id(req.processing_version, "processing_version")
        names = {
            "workflow_id": req.workflow_id,
            "step": req.step,
            "source": req.source,
            "input_ref": req.input_ref,
            "approval_version": req.approval.version if req.approval else None,
        }
        check_optional(names)
        names["input_ref"] = self._redacted(req.input_ref, MAX_INPUT_REF_LENGTH)
        check_run_index(req.run_index)
        request = domain.DispatchRequest(
            input_hash=self._resolve_hash(req.has_input, req.input, req.input_hash),
            processing_version=req.processing_version,
            execution_id=req.execution_id,
            run_index=req.run_index,
            deadline=req.deadline,
            approval=req.approval,
        )
        extra = {**names, "approval_expires_at": req.approval.expires_at if req.approval else None}

        def work(tx: Tx) -> Answer:
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
            with tx.together():  # one statement on PostgreSQL
                if change.operation is not None:
                    records.save_operation(tx, row, change.operation, extra)
                if change.new_attempt:
                    assert change.operation is not None
                    records.insert_attempt(tx, change.operation, extra)
            hold_ids = self._open(tx, operation_id, change.holds, execution_id=req.execution_id)
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
                if change.operation is not None:
                    data.update(
                        records.written_with(change.operation, names["input_ref"], row is None)
                    )
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
                hold_ids,
            )

        return Call(self, work)

    def prepare(
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
    ) -> Call[Answer]:
        """Record the input and version without claiming the operation."""
        check_id(operation_id, "operation_id")
        check_id(processing_version, "processing_version")
        digest = self._resolve_hash(has_input, input, input_hash)
        extra = {"workflow_id": workflow_id, "step": step, "source": source, "input_ref": input_ref}
        check_optional(extra)
        extra["input_ref"] = self._redacted(input_ref, MAX_INPUT_REF_LENGTH)

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
            if change.event is not None:
                data = {"input_hash": digest, "processing_version": processing_version}
                if change.operation is not None:
                    data.update(
                        records.written_with(change.operation, extra["input_ref"], row is None)
                    )
                tx.event(change.event, operation_id, data)
            final = change.operation or op
            assert final is not None
            return Answer(operation_id, final.state.value, attempt=final.attempt)

        return Call(self, work)

    def confirm(
        self,
        operation_id: str,
        receipt: str,
        *,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> Call[Answer]:
        """The workflow reports the target's receipt for its write."""
        check_id(operation_id, "operation_id")
        check_receipt(receipt)
        check_optional({"execution_id": execution_id})
        check_detail(detail)
        receipt = self._redact_receipt(receipt)
        detail = self._redacted(detail, MAX_DETAIL_LENGTH)

        def work(tx: Tx) -> Answer:
            row, holds = records.load_with_holds(tx, operation_id)
            if row is None:
                raise NotFound(f"no operation {operation_id!r}")
            op = records.to_domain(row)
            change = domain.confirm(op, receipt, holds)
            hold_ids = self._open(tx, operation_id, change.holds, execution_id=execution_id)
            with tx.together():  # one statement on PostgreSQL
                if change.operation is not None:
                    records.save_operation(tx, row, change.operation)
                    records.end_attempt(tx, operation_id, op.attempt, "confirmed")
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
            if change.operation is not None:
                crashpoint("after_confirm_update")
            if change.event is not None:
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
                hold_ids=hold_ids,
            )

        return Call(self, work)

    def fail(
        self,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        *,
        execution_id: str | None = None,
    ) -> Call[Answer]:
        """The workflow reports that its write was rejected, or that it cannot tell."""
        check_id(operation_id, "operation_id")
        check_optional({"execution_id": execution_id})
        error = self.redact(error or "")[:MAX_ERROR_LENGTH]

        def work(tx: Tx) -> Answer:
            row, holds = records.load_with_holds(tx, operation_id)
            if row is None:
                raise NotFound(f"no operation {operation_id!r}")
            op = records.to_domain(row)
            reported = error or f"the workflow reported {outcome.value}"
            change = domain.fail(op, outcome, reported, holds)
            # Unknown leaves the operation as it is but opens a hold: compare-and-set it
            # anyway, so a change of the row since it was read ahead for this unit (by an
            # earlier unit of its batch) makes it run again (and refuse). A confirm
            # elsewhere waits for the lock our read took, then resolves the hold.
            records.save_operation(tx, row, change.operation or op)
            if change.operation is not None:
                records.end_attempt(tx, operation_id, op.attempt, "rejected", error)
            hold_ids = self._open(tx, operation_id, change.holds, execution_id=execution_id)
            close_holds(tx, change, operation_id, note=f"rejected by the target: {reported}")
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
                hold_ids=hold_ids,
            )

        return Call(self, work)

    def execution_failed(
        self, execution_id: str, detail: str
    ) -> Call[list[tuple[str, int | None]]]:
        """A workflow execution errored: open a blocking ``execution_failed`` hold on every
        operation it left ``dispatching`` (whose current attempt it made). Answers
        ``(operation_id, hold_id or None when that cause already had one)`` pairs."""
        check_id(execution_id, "execution_id")
        detail = self.redact(detail)

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
            ids = self.open_holds(tx, targets, locked=True)  # read FOR UPDATE
            return [(op.operation_id, i) for op, i in zip(ops, ids, strict=True)]

        return Call(self, work)

    # ------------------------------------------------------------------ holds

    def open_hold(
        self,
        hold: NewHold,
        *,
        operation_id: str | None = None,
        execution_id: str | None = None,
        source: str | None = None,
    ) -> Call[int | None]:
        """Open a hold unless one with its cause key exists. Answers its id, or ``None`` when
        the cause already had one."""
        target = HoldTarget(hold, operation_id, execution_id, source)
        return Call(self, lambda tx: self.open_holds(tx, [target])[0])

    def _open(
        self,
        tx: Tx,
        operation_id: str,
        holds: Sequence[NewHold],
        *,
        execution_id: str | None,
    ) -> list[int]:
        """Open a rule's holds on one operation; the ids of those that were new. The unit
        read the operation with its lock (``records.load_with_holds``) or inserted it."""
        targets = [HoldTarget(h, operation_id, execution_id) for h in holds]
        return [i for i in self.open_holds(tx, targets, locked=True) if i is not None]

    def open_holds(
        self, tx: Tx, targets: Sequence[HoldTarget], *, locked: bool = False
    ) -> list[int | None]:
        """Open each hold whose cause key has none yet, in the caller's transaction, with this
        ledger's deadlines and alert targets (:func:`flowledger.services.holds.open_holds`;
        ``locked``: the caller holds the operations' row locks already)."""
        return open_hold_rows(tx, targets, self.hold_deadlines, self.alert_targets, locked=locked)

    def resolve(
        self,
        hold_id: int,
        action: str,
        *,
        note: str,
        operator: str,
        receipt: str | None = None,
    ) -> Call[Answer | None]:
        """A person's decision on a hold: ``confirm`` (with a receipt), ``release``,
        ``cancel`` or ``dismiss``. Every one needs a note and is recorded with the operator."""
        if receipt is not None:
            check_receipt(receipt)
            receipt = self._redact_receipt(receipt)
        note = self.redact(check_note(note))[:MAX_NOTE_LENGTH]
        work = resolution_work(hold_id, action, note, receipt)
        return Call(self, work, operator_actor(operator))

    def update_hold(
        self,
        hold_id: int,
        *,
        operator: str,
        note: str,
        owner: str | None = None,
        deadline: datetime | None = None,
        next_action: str | None = None,
    ) -> Call[None]:
        """Assign, extend the deadline, set the next action, or just add a note."""
        note = self.redact(check_note(note).strip())[:MAX_NOTE_LENGTH]
        if not note:
            raise IllegalTransition("a note is required", code="note_required")
        actor = operator_actor(operator)
        if owner is not None:
            check_id(owner, "owner")
        next_action = self._redacted(next_action, MAX_NEXT_ACTION_LENGTH)
        work = update_work(hold_id, note, owner=owner, deadline=deadline, next_action=next_action)
        return Call(self, work, actor)
