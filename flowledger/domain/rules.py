"""The workflow's moves: dispatch, prepare, confirm and fail, each a pure function from the
stored operation (and its open holds) to a :class:`~flowledger.domain.model.Change`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from flowledger.domain.causes import new_hold, one_per_reason
from flowledger.domain.display import counted
from flowledger.domain.model import (
    DEFAULT_DISPATCH_DEADLINE,
    DEFAULT_MAX_ATTEMPTS,
    OUTCOME_REASONS,
    Approval,
    Change,
    Decision,
    DispatchRequest,
    FailOutcome,
    IllegalTransition,
    NewHold,
    OpenHold,
    Operation,
    Reason,
    Resolution,
    State,
)
from flowledger.domain.times import for_people

# --------------------------------------------------------------------------- dispatch


def dispatch(
    op: Operation | None,
    req: DispatchRequest,
    holds: list[OpenHold],
    now: datetime,
    *,
    operation_id: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    default_deadline: timedelta = DEFAULT_DISPATCH_DEADLINE,
    unsent: int = 0,
) -> Change:
    """Decide whether a workflow may write now.

    ``go`` only when the intent can be recorded as ``dispatching``; the caller must commit that
    durably before it answers. ``unsent`` is how many of the operation's attempts the workflow
    released before writing (:func:`release`): those never reached the target and do not count
    against ``max_attempts``.
    """
    deadline = req.deadline or now + default_deadline
    approval_problem = _approval_problem(req, now, operation_id)
    if approval_problem is not None and op is not None and _stands(op.reapproval, req, now):
        approval_problem = None  # a person approved this version again

    if op is None:
        if approval_problem is not None:
            prepared = Operation(
                operation_id,
                State.PREPARED,
                req.input_hash,
                req.processing_version,
                max_attempts=max_attempts,
            )
            return _held(prepared, approval_problem, created=True)
        created = Operation(
            operation_id,
            State.DISPATCHING,
            req.input_hash,
            req.processing_version,
            attempt=1,
            max_attempts=max_attempts,
            execution_id=req.execution_id,
            run_index=req.run_index,
            deadline=deadline,
        )
        return Change(
            Decision.GO,
            created,
            "dispatched",
            new_attempt=True,
            data={"attempt": 1, "created": True},
        )

    if req.input_hash != op.input_hash:
        return _held(
            op,
            new_hold(
                Reason.INPUT_MISMATCH,
                f"dispatch with input {req.input_hash} but the operation records {op.input_hash}",
                operation_id=op.operation_id,
                input_hash=req.input_hash,
            ),
            holds,
        )
    if req.processing_version != op.processing_version:
        return _held(
            op,
            new_hold(
                Reason.VERSION_MISMATCH,
                f"dispatch with version {req.processing_version!r} but the operation records "
                f"{op.processing_version!r}",
                operation_id=op.operation_id,
                processing_version=req.processing_version,
            ),
            holds,
        )

    blocking = [h for h in holds if h.blocking]
    if blocking:
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=blocking[0].reason,
            receipt=op.receipt,
            data={"execution_id": req.execution_id},
        )

    if op.state is State.CONFIRMED:
        return Change(Decision.SKIP, None, None, receipt=op.receipt)
    if op.state is State.CANCELLED:
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=Reason.CANCELLED,
            data={"execution_id": req.execution_id},
        )
    if op.state is State.DISPATCHING:
        if req.execution_id == op.execution_id and req.run_index == op.run_index:
            return Change(Decision.GO, None, None)  # a replay gets the same answer
        return Change(
            Decision.HOLD,
            None,
            "dispatch_held",
            reason=Reason.IN_FLIGHT,
            data={"execution_id": req.execution_id, "in_flight": op.execution_id},
        )

    if approval_problem is not None:
        return _held(op, approval_problem, holds)
    if op.attempt - unsent + 1 > op.max_attempts:
        return _held(
            op,
            new_hold(
                Reason.MAX_ATTEMPTS,
                f"{counted(op.attempt - unsent, 'attempt')} used of {op.max_attempts}",
                operation_id=op.operation_id,
                attempt=op.attempt,
            ),
            holds,
        )
    attempt = op.attempt + 1
    claimed = replace(
        op,
        state=State.DISPATCHING,
        attempt=attempt,
        execution_id=req.execution_id,
        run_index=req.run_index,
        deadline=deadline,
    )
    return Change(
        Decision.GO,
        claimed,
        "dispatched",
        new_attempt=True,
        data={"attempt": attempt, "from": op.state.value},
    )


def _approval_problem(req: DispatchRequest, now: datetime, operation_id: str) -> NewHold | None:
    approval = req.approval
    if approval is None:
        return None
    if approval.version != req.processing_version:
        return new_hold(
            Reason.APPROVAL_VERSION,
            f"approval names version {approval.version!r}, dispatch runs "
            f"{req.processing_version!r}",
            operation_id=operation_id,
            approval_version=approval.version,
            processing_version=req.processing_version,
        )
    if approval.expires_at is not None and approval.expires_at <= now:
        return new_hold(
            Reason.APPROVAL_EXPIRED,
            f"approval expired at {for_people(approval.expires_at)}",
            operation_id=operation_id,
            expires_at=approval.expires_at,
        )
    return None


def _stands(approval: Approval | None, req: DispatchRequest, now: datetime) -> bool:
    """Whether a person's approval covers this dispatch: it names the version the dispatch
    runs and has not expired."""
    if approval is None or approval.version != req.processing_version:
        return False
    return approval.expires_at is None or approval.expires_at > now


def _held(
    op: Operation, hold: NewHold, holds: Sequence[OpenHold] = (), *, created: bool = False
) -> Change:
    opened, evidence = one_per_reason(hold, holds)
    return Change(
        Decision.HOLD,
        op if created else None,
        "dispatch_held",
        reason=hold.reason,
        receipt=op.receipt,
        holds=opened,
        evidence=evidence,
        data={"created": created},
    )


# --------------------------------------------------------------------------- prepare


def prepare(
    op: Operation | None,
    input_hash: str,
    processing_version: str,
    *,
    operation_id: str,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Change:
    """Record the input and version without claiming; idempotent for the same values."""
    if op is None:
        created = Operation(
            operation_id, State.PREPARED, input_hash, processing_version, max_attempts=max_attempts
        )
        return Change(None, created, "prepared")
    if op.input_hash != input_hash:
        raise IllegalTransition(
            f"operation {operation_id} records another input", code="input_mismatch"
        )
    if op.processing_version != processing_version:
        raise IllegalTransition(
            f"operation {operation_id} records another processing version", code="version_mismatch"
        )
    return Change(None, None, None)


# --------------------------------------------------------------------------- outcome


def confirm(op: Operation, receipt: str, holds: list[OpenHold]) -> Change:
    """The workflow reports the target's receipt for the current attempt."""
    if op.state is State.CONFIRMED:
        if receipt == op.receipt:
            return Change(None, None, None, receipt=op.receipt)
        detail = (
            f"second receipt {receipt!r} differs from {op.receipt!r}: possible duplicate effect"
        )
        return _conflicting(op, receipt, detail, holds, op.receipt)
    if op.state is State.DISPATCHING:
        outcome_holds = tuple(h.hold_id for h in holds if h.reason in OUTCOME_REASONS)
        return Change(
            None,
            replace(op, state=State.CONFIRMED, receipt=receipt),
            "confirmed",
            receipt=receipt,
            resolve_holds=outcome_holds,
            resolution=Resolution.CONFIRMED_BY_RECEIPT if outcome_holds else None,
            data={"attempt": op.attempt},
        )
    if op.state in (State.FAILED, State.CANCELLED):
        # A receipt after a rejection or a cancellation: the effect happened after all.
        detail = f"receipt {receipt!r} arrived for an operation in state {op.state.value}"
        return _conflicting(op, receipt, detail, holds)
    raise IllegalTransition(
        f"operation {op.operation_id} is {op.state.value}; only a dispatched operation "
        "can be confirmed"
    )


def _conflicting(
    op: Operation, receipt: str, detail: str, holds: Sequence[OpenHold], stands: str | None = None
) -> Change:
    """A receipt that conflicts with what the operation records (``stands``): its hold, or its
    evidence for the ``receipt_conflict`` hold already open (:func:`one_per_reason`)."""
    key = {"operation_id": op.operation_id, "receipt": receipt}
    opened, evidence = one_per_reason(new_hold(Reason.RECEIPT_CONFLICT, detail, **key), holds)
    return Change(
        None,
        None,
        "receipt_conflict",
        receipt=stands,
        holds=opened,
        evidence=evidence,
        data={"receipt": receipt, "attempt": op.attempt},
    )


def fail(op: Operation, outcome: FailOutcome, error: str, holds: Sequence[OpenHold] = ()) -> Change:
    """The workflow reports that its write failed, or that it cannot tell. A rejection answers
    the question an outcome hold asks (did the write happen? no), so, like a late confirm, it
    resolves those holds: left open they would hold every later dispatch of an operation that
    no decision can release any more."""
    if op.state is not State.DISPATCHING:
        raise IllegalTransition(
            f"operation {op.operation_id} is {op.state.value}; only a dispatched operation can fail"
        )
    if outcome is FailOutcome.REJECTED:
        outcome_holds = tuple(h.hold_id for h in holds if h.reason in OUTCOME_REASONS)
        return Change(
            None,
            replace(op, state=State.FAILED),
            "failed",
            resolve_holds=outcome_holds,
            resolution=Resolution.REJECTED_BY_TARGET if outcome_holds else None,
            data={"attempt": op.attempt, "outcome": outcome.value},
        )
    return Change(
        None,
        None,
        "failed_unknown",
        holds=(unknown_outcome_hold(op, error),),
        data={"attempt": op.attempt, "outcome": outcome.value},
    )


def release_dispatch(
    op: Operation, execution_id: str, run_index: int | None, holds: Sequence[OpenHold]
) -> Change:
    """The workflow gives back a ``go`` it did not act on: the execution that dispatched the
    current attempt says it wrote nothing (an n8n Guard that stopped on another item's hold
    before passing this one on). The operation is ``prepared`` again, without a hold, and the
    attempt ends ``unsent``, which does not count against ``max_attempts``.

    Only the execution (and run) that holds the attempt may release it, and not once the
    ledger holds the operation for a person to find out whether it was written (an
    ``unknown_outcome`` or ``execution_failed`` hold): that question is answered with
    evidence, by a person. A release that finds the operation already ``prepared`` changes
    nothing (its answer was lost)."""
    if op.state is State.PREPARED:
        return Change(None, None, None)
    if op.state is not State.DISPATCHING:
        raise IllegalTransition(
            f"operation {op.operation_id} is {op.state.value}; only a dispatched operation "
            "can be released"
        )
    if execution_id != op.execution_id or run_index != op.run_index:
        raise IllegalTransition(
            f"operation {op.operation_id} was dispatched by execution {op.execution_id} "
            f"({_run(op.run_index)}), not {execution_id} ({_run(run_index)}): only the "
            "execution that dispatched it can release it",
            code="not_dispatched_by_this_execution",
        )
    asked = [h for h in holds if h.reason in OUTCOME_REASONS]
    if asked:
        raise IllegalTransition(
            f"operation {op.operation_id} is held ({asked[0].reason.value}, hold "
            f"{asked[0].hold_id}): whether it was written is for a person to decide",
            code="held_for_a_person",
        )
    return Change(
        None,
        replace(op, state=State.PREPARED, execution_id=None, run_index=None, deadline=None),
        "dispatch_released",
        data={"attempt": op.attempt},
    )


def _run(run_index: int | None) -> str:
    return "no run index" if run_index is None else f"run {run_index}"


class AttemptOf(Protocol):
    """What a hold about an operation's attempt reads of it: a :class:`Operation`, or
    anything else with these two fields. (The sweep takes each hold's cause key from its own
    query instead, built by ``flowledger.storage.due.sql_cause_key``.)"""

    @property
    def operation_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...


def unknown_outcome_hold(op: AttemptOf, detail: str) -> NewHold:
    return new_hold(
        Reason.UNKNOWN_OUTCOME, detail, operation_id=op.operation_id, attempt=op.attempt
    )


def execution_failed_hold(op: AttemptOf, execution_id: str, detail: str) -> NewHold:
    return new_hold(
        Reason.EXECUTION_FAILED,
        detail,
        operation_id=op.operation_id,
        attempt=op.attempt,
        execution_id=execution_id,
    )
