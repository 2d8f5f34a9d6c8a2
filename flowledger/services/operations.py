"""The workflow calls on one operation as units of work: dispatch, prepare, confirm, fail, and
an execution's failure.

Each function is given what its service checked (:class:`~flowledger.services.ledger.Ledger`
checks, redacts and hashes the request first) and returns the work that reads the rows the
rule needs, asks ``flowledger.domain``, writes the outcome with a compare-and-set on the
operation's ``version`` column and records the events, all through its transaction as the
port (:class:`flowledger.services.port.Tx`) offers it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from flowledger import domain
from flowledger.domain import FailOutcome, NewHold, OpenHold, Reason, twins
from flowledger.plumbing.faults import crashpoint
from flowledger.services.holds import close_holds
from flowledger.services.port import Tx
from flowledger.services.twins import record_twin
from flowledger.services.values import Answer, HoldTarget, NotFound
from flowledger.storage import operations as records
from flowledger.storage.sql import Row


class Rules(Protocol):
    """What the works ask of the ledger they run for: its limits, and how it opens holds."""

    max_attempts: int
    dispatch_deadline: timedelta
    twin_window: timedelta

    def open_holds(
        self, tx: Tx, targets: Sequence[HoldTarget], *, locked: bool = False
    ) -> list[int | None]: ...

    def add_evidence(
        self,
        tx: Tx,
        operation_id: str,
        evidence: Sequence[tuple[int, NewHold]],
        *,
        execution_id: str | None,
    ) -> None: ...


def open_rule_holds(
    rules: Rules,
    tx: Tx,
    operation_id: str,
    change: domain.Change,
    *,
    execution_id: str | None,
) -> list[int]:
    """Open a rule's holds on one operation, and add its further causes to the holds of their
    reasons already open; the ids of the holds that were new. The unit read the operation
    with its lock (``tx.load_with_holds``) or inserted it."""
    if change.evidence:
        rules.add_evidence(tx, operation_id, change.evidence, execution_id=execution_id)
    if not change.holds:  # the usual call: nothing to open, nothing to look up
        return []
    targets = [HoldTarget(h, operation_id, execution_id) for h in change.holds]
    return [i for i in rules.open_holds(tx, targets, locked=True) if i is not None]


def held_by(
    change: domain.Change, open_before: Sequence[OpenHold], opened: list[int]
) -> int | None:
    """The hold a dispatch answered ``hold`` is about: the operation's open hold of the
    answer's reason (read with the operation), else the one this call opened."""
    if change.decision is not domain.Decision.HOLD:
        return None
    for hold in open_before:
        if hold.reason == change.reason:
            return hold.hold_id
    return opened[0] if opened else None


def dispatch_work(
    rules: Rules,
    operation_id: str,
    request: domain.DispatchRequest,
    names: dict[str, Any],
    extra: dict[str, Any],
) -> Callable[[Tx], Answer]:
    """May a workflow write now? ``names`` are the request's checked optional names (its
    ``input_ref`` redacted), ``extra`` what the operation row takes of them."""

    def work(tx: Tx) -> Answer:
        row, holds = tx.load_with_holds(operation_id, mark=True)
        op = records.to_domain(row) if row is not None else None
        at_limit = op is not None and op.attempt + 1 > op.max_attempts
        change = domain.dispatch(
            op,
            request,
            holds,
            tx.now,
            operation_id=operation_id,
            max_attempts=rules.max_attempts,
            default_deadline=rules.dispatch_deadline,
            unsent=tx.unsent_attempts(operation_id) if at_limit else 0,
        )
        # Who dispatched it last, whatever the answer: a second execution of the workflow
        # within the window is a twin trigger (rare: the usual dispatch only compares). A
        # dispatch of another input or version is another call, held as such: neither.
        twin: twins.Twin | None = None
        moved: twins.Mark | None = None
        if op is None or (op.input_hash, op.processing_version) == (
            request.input_hash,
            request.processing_version,
        ):
            mark = records.mark_of(row) if row is not None else None
            workflow_id = names["workflow_id"]
            execution_id = request.execution_id
            window = rules.twin_window
            twin = twins.twin_of(mark, operation_id, execution_id, workflow_id, tx.now, window)
            moved = twins.next_mark(mark, execution_id, workflow_id, tx.now, twin)
        crashpoint("before_dispatch_write")
        with tx.together():  # one statement on PostgreSQL
            if change.operation is not None:
                tx.save_operation(row, change.operation, extra, moved)
            elif moved is not None:
                tx.mark_dispatch(operation_id, moved)
            if change.new_attempt:
                assert change.operation is not None
                tx.insert_attempt(change.operation, extra)
        hold_ids = open_rule_holds(
            rules, tx, operation_id, change, execution_id=request.execution_id
        )
        if change.event is not None:
            data = {
                "decision": change.decision.value if change.decision else None,
                "execution_id": request.execution_id,
                "run_index": request.run_index,
                "input_hash": request.input_hash,
                "processing_version": request.processing_version,
                **change.data,
            }
            if change.reason is not None:
                data["reason"] = change.reason.value
            if change.operation is not None:
                data.update(records.written_with(change.operation, names["input_ref"], row is None))
            tx.event(change.event, operation_id, data)
        if twin is not None:
            record_twin(rules, tx, twin, names["source"])
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
            held_by(change, holds, hold_ids),
        )

    return work


def prepare_work(
    rules: Rules,
    operation_id: str,
    digest: str,
    processing_version: str,
    extra: dict[str, Any],
) -> Callable[[Tx], Answer]:
    """Record the input and version without claiming the operation."""

    def work(tx: Tx) -> Answer:
        row = tx.load_operation(operation_id)
        op = records.to_domain(row) if row is not None else None
        change = domain.prepare(
            op,
            digest,
            processing_version,
            operation_id=operation_id,
            max_attempts=rules.max_attempts,
        )
        if change.operation is not None:
            tx.save_operation(row, change.operation, extra)
        if change.event is not None:
            data = {"input_hash": digest, "processing_version": processing_version}
            if change.operation is not None:
                data.update(records.written_with(change.operation, extra["input_ref"], row is None))
            tx.event(change.event, operation_id, data)
        final = change.operation or op
        assert final is not None
        return Answer(operation_id, final.state.value, attempt=final.attempt)

    return work


def _require_with_holds(tx: Tx, operation_id: str) -> tuple[Row, domain.Operation, list[OpenHold]]:
    """The operation's row (locked), as the domain sees it, and its open holds; or NotFound."""
    row, holds = tx.load_with_holds(operation_id)
    if row is None:
        raise NotFound(f"no operation {operation_id!r}")
    return row, records.to_domain(row), holds


def confirm_work(
    rules: Rules,
    operation_id: str,
    receipt: str,
    execution_id: str | None,
    detail: str | None,
) -> Callable[[Tx], Answer]:
    """The workflow reports the target's receipt for its write."""

    def work(tx: Tx) -> Answer:
        row, op, holds = _require_with_holds(tx, operation_id)
        change = domain.confirm(op, receipt, holds)
        conflict = bool(change.holds or change.evidence)
        hold_ids = open_rule_holds(rules, tx, operation_id, change, execution_id=execution_id)
        with tx.together():  # one statement on PostgreSQL
            if change.operation is not None:
                tx.save_operation(row, change.operation)
                tx.end_attempt(operation_id, op.attempt, "confirmed")
            if change.event is not None:
                tx.insert_receipt(
                    operation_id,
                    op.attempt,
                    receipt,
                    kind="conflict" if conflict else "workflow",
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
            reason=Reason.RECEIPT_CONFLICT.value if conflict else None,
            hold_ids=hold_ids,
        )

    return work


def fail_work(
    rules: Rules,
    operation_id: str,
    outcome: FailOutcome,
    error: str,
    execution_id: str | None,
) -> Callable[[Tx], Answer]:
    """The workflow reports that its write was rejected, or that it cannot tell."""

    def work(tx: Tx) -> Answer:
        row, op, holds = _require_with_holds(tx, operation_id)
        reported = error or f"the workflow reported {outcome.value}"
        change = domain.fail(op, outcome, reported, holds)
        # Unknown leaves the operation as it is but opens a hold: compare-and-set it anyway,
        # so a change of the row since it was read ahead for this unit (by an earlier unit of
        # its batch) makes it run again (and refuse). A confirm elsewhere waits for the lock
        # our read took, then resolves the hold.
        tx.save_operation(row, change.operation or op)
        if change.operation is not None:
            tx.end_attempt(operation_id, op.attempt, "rejected", error)
        # The hold is about the attempt's execution when the call names none.
        about = execution_id or op.execution_id
        hold_ids = open_rule_holds(rules, tx, operation_id, change, execution_id=about)
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

    return work


def release_work(
    operation_id: str,
    execution_id: str,
    run_index: int | None,
    reason: str | None,
    forget: tuple[int, str] | None,
) -> Callable[[Tx], Answer]:
    """The workflow gives back a ``go`` it did not act on: ``prepared`` again, no hold.
    ``forget`` is the token and ``Idempotency-Key`` of the dispatch released, whose stored
    ``go`` is removed in the same transaction: n8n's Retry On Fail sends that dispatch
    again with the same key, and must be answered afresh."""

    def work(tx: Tx) -> Answer:
        row, op, holds = _require_with_holds(tx, operation_id)
        change = domain.release_dispatch(op, execution_id, run_index, holds)
        if forget is not None:
            tx.forget_answer(forget[0], forget[1], operation_id)
        if change.operation is not None:
            tx.save_operation(row, change.operation)
            tx.end_attempt(operation_id, op.attempt, domain.UNSENT, reason)
            tx.event(
                "dispatch_released",
                operation_id,
                {"execution_id": execution_id, "run_index": run_index, "reason": reason,
                 **change.data},
            )  # fmt: skip
        final = change.operation or op
        return Answer(operation_id, final.state.value, attempt=final.attempt)

    return work


def execution_failed_work(
    rules: Rules, execution_id: str, detail: str
) -> Callable[[Tx], list[tuple[str, int | None]]]:
    """A workflow execution errored: a blocking ``execution_failed`` hold on every operation it
    left ``dispatching`` (whose current attempt it made)."""

    def work(tx: Tx) -> list[tuple[str, int | None]]:
        ops = [records.to_domain(r) for r in tx.dispatching_for_execution(execution_id)]
        targets = [
            HoldTarget(
                domain.execution_failed_hold(op, execution_id, detail),
                op.operation_id,
                execution_id=execution_id,
            )
            for op in ops
        ]
        ids = rules.open_holds(tx, targets, locked=True)  # read FOR UPDATE
        return [(op.operation_id, i) for op, i in zip(ops, ids, strict=True)]

    return work
