"""The services: every change to operations, attempts, receipts and holds goes through here,
with its event, in one transaction.

Each service checks its input at once (a bad value is refused before any transaction) and
returns a :class:`~flowledger.services.call.Call` of its work on the ledger's unit of work
(:class:`~flowledger.storage.unit_of_work.UnitOfWork`): the workflow calls' works are in
:mod:`flowledger.services.operations`, a person's decisions on holds in
:mod:`flowledger.services.holds`. ``call.run(actor)`` runs it in a transaction of its own; the
receiver's group commit runs many ``call.work`` in one (:meth:`Ledger.run_many`). A lost
compare-and-set (another writer got there first) or a unique-key race on PostgreSQL runs the
work again against the fresh rows, so two concurrent dispatches of one operation produce
exactly one ``go``.

The values it takes and answers are in :mod:`flowledger.services.values`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from flowledger import domain
from flowledger.domain import FailOutcome, IllegalTransition, NewHold
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
from flowledger.domain.twins import DEFAULT_TWIN_WINDOW
from flowledger.plumbing.clock import Clock, utcnow
from flowledger.services import operations, outbox
from flowledger.services.call import Call
from flowledger.services.holds import add_evidence, resolution_work, update_work
from flowledger.services.holds import open_holds as open_hold_rows
from flowledger.services.port import Tx as Port
from flowledger.services.values import (
    Answer,
    DispatchInput,
    HoldTarget,
    InvalidInput,
    NotFound,
    check_detail,
    check_id,
    check_note,
    check_operation_id,
    check_optional,
    check_receipt,
    check_run_index,
    operator_actor,
)
from flowledger.storage.engine import Store

# The transaction the unit of work runs a work in, for the callers that run SQL of their own
# in it (the sync, the sweep, the receiver's guards); the services' works take the port.
from flowledger.storage.transaction import SqlTx as Tx
from flowledger.storage.unit_of_work import Guard, Outcome, UnitOfWork, Work

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

T = TypeVar("T")


class Ledger:
    """The ledger's services over one store, on the unit of work it holds (:attr:`unit`).
    Each service checks its input and returns a :class:`~flowledger.services.call.Call`;
    ``clock`` is injectable for tests; ``unit`` is the unit of work to run on instead of one
    over ``store`` (with its own clock, retries and secrets): a test passes a fake, whose
    transactions keep their rows in memory (``tests/support/fakes/ledger.py``).

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
        twin_window: timedelta = DEFAULT_TWIN_WINDOW,
        clock: Clock = utcnow,
        retries: int = 20,
        alert_urls: Sequence[str] = (),
        pin_sources: Sequence[str] = (),
        secrets: Secrets = NO_SECRETS,
        unit: UnitOfWork | None = None,
    ) -> None:
        if unit is None:
            unit = UnitOfWork(store, clock=clock, retries=retries, secrets=secrets)
        self.unit = unit
        self.store = store
        self.secret = secret
        self.max_attempts = max_attempts
        self.dispatch_deadline = dispatch_deadline
        self.hold_deadlines = hold_deadlines
        self.twin_window = twin_window
        self.alert_targets = sorted(outbox.targets_of(alert_urls))
        self.pin_sources = sorted(pin_sources)  # whose executions a hold about one pins

    # ------------------------------------------------------------------ the unit of work

    @property
    def clock(self) -> Clock:
        """What the unit of work reads the time from (replaceable, for tests)."""
        return self.unit.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.unit.clock = clock

    @property
    def secrets(self) -> Secrets:
        """The secrets redacted from outside text (:meth:`add_secrets` adds to them)."""
        return self.unit.secrets

    @property
    def retries(self) -> int:
        return self.unit.retries

    def add_secrets(self, values: Iterable[str]) -> None:
        self.unit.add_secrets(values)

    def redact(self, text: str) -> str:
        return self.unit.redact(text)

    def transaction(self, actor: str) -> AbstractContextManager[Tx]:
        """One write transaction of its own (:meth:`UnitOfWork.transaction`)."""
        return self.unit.transaction(actor)

    def run(self, actor: str, work: Work[T]) -> T:
        return self.unit.run(actor, work)

    def run_many(
        self,
        units: Sequence[tuple[str, Work[Any]]],
        guards: Sequence[Guard | None] = (),
        reads: Sequence[str | None] = (),
    ) -> list[Outcome]:
        """Several works in one transaction, one commit (:meth:`UnitOfWork.run_many`)."""
        return self.unit.run_many(units, guards, reads)

    # ------------------------------------------------------------------ checks

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
        """``text`` redacted, cut to its checked limit (``[redacted]`` may be longer than it)."""
        return None if text is None else self.unit.redact(text)[:longest]

    def _redact_receipt(self, receipt: str) -> str:
        """A receipt stays exact (the target's reference) unless it holds a configured secret."""
        return self.unit.redact(receipt)[:MAX_RECEIPT_LENGTH]

    # ------------------------------------------------------------------ workflow calls

    def dispatch(self, operation_id: str, req: DispatchInput) -> Call[Answer]:
        """May a workflow write now? ``go`` is answered only after the ``dispatching`` state
        is committed."""
        check_operation_id(operation_id)
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
        return Call(self.unit, operations.dispatch_work(self, operation_id, request, names, extra))

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
        check_operation_id(operation_id)
        check_id(processing_version, "processing_version")
        digest = self._resolve_hash(has_input, input, input_hash)
        extra = {"workflow_id": workflow_id, "step": step, "source": source, "input_ref": input_ref}
        check_optional(extra)
        extra["input_ref"] = self._redacted(input_ref, MAX_INPUT_REF_LENGTH)
        work = operations.prepare_work(self, operation_id, digest, processing_version, extra)
        return Call(self.unit, work)

    def confirm(
        self,
        operation_id: str,
        receipt: str,
        *,
        execution_id: str | None = None,
        detail: str | None = None,
    ) -> Call[Answer]:
        """The workflow reports the target's receipt for its write."""
        check_operation_id(operation_id)
        check_receipt(receipt)
        check_optional({"execution_id": execution_id})
        check_detail(detail)
        receipt = self._redact_receipt(receipt)
        detail = self._redacted(detail, MAX_DETAIL_LENGTH)
        work = operations.confirm_work(self, operation_id, receipt, execution_id, detail)
        return Call(self.unit, work)

    def fail(
        self,
        operation_id: str,
        outcome: FailOutcome,
        error: str = "",
        *,
        execution_id: str | None = None,
    ) -> Call[Answer]:
        """The workflow reports that its write was rejected, or that it cannot tell."""
        check_operation_id(operation_id)
        check_optional({"execution_id": execution_id})
        error = self.unit.redact(error or "")[:MAX_ERROR_LENGTH]
        work = operations.fail_work(self, operation_id, outcome, error, execution_id)
        return Call(self.unit, work)

    def release(
        self,
        operation_id: str,
        *,
        execution_id: str,
        run_index: int | None = None,
        reason: str | None = None,
        forget: tuple[int, str] | None = None,
    ) -> Call[Answer]:
        """The execution that dispatched the operation gives back its ``go`` unwritten:
        ``prepared`` again without a hold (``forget``: the token and key of the dispatch's
        stored answer, removed with it)."""
        check_operation_id(operation_id)
        check_id(execution_id, "execution_id")
        check_run_index(run_index)
        reason = self.unit.redact(reason)[:MAX_ERROR_LENGTH] if reason else None
        work = operations.release_work(operation_id, execution_id, run_index, reason, forget)
        return Call(self.unit, work)

    def execution_failed(
        self, execution_id: str, detail: str
    ) -> Call[list[tuple[str, int | None]]]:
        """A workflow execution errored: open a blocking ``execution_failed`` hold on every
        operation it left ``dispatching`` (whose current attempt it made). Answers
        ``(operation_id, hold_id or None when that cause already had one)`` pairs."""
        check_id(execution_id, "execution_id")
        detail = self.unit.redact(detail)
        return Call(self.unit, operations.execution_failed_work(self, execution_id, detail))

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
        return Call(self.unit, lambda tx: self.open_holds(tx, [target])[0])

    def open_holds(
        self, tx: Port, targets: Sequence[HoldTarget], *, locked: bool = False
    ) -> list[int | None]:
        """Open each hold whose cause key has none yet, in ``tx``, with this ledger's deadlines,
        alert targets and pin sources (:func:`~flowledger.services.holds.open_holds`)."""
        return open_hold_rows(
            tx, targets, self.hold_deadlines, self.alert_targets, self.unit.secrets,
            locked=locked, pin_sources=self.pin_sources,
        )  # fmt: skip

    def add_evidence(
        self,
        tx: Port,
        operation_id: str,
        evidence: Sequence[tuple[int, NewHold]],
        *,
        execution_id: str | None,
    ) -> None:
        """Add further causes to the open holds of their reasons, in the caller's transaction
        (:func:`flowledger.services.holds.add_evidence`)."""
        add_evidence(tx, operation_id, evidence, execution_id, self.unit.secrets)

    def resolve(
        self,
        hold_id: int,
        action: str,
        *,
        note: str,
        operator: str,
        receipt: str | None = None,
        version: str | None = None,
        expires_at: datetime | None = None,
        retry: bool = False,
    ) -> Call[Answer | None]:
        """A person's decision on a hold, with a note, under the operator's name: ``confirm``
        (a receipt), ``release`` (``retry``: run its execution again), ``cancel``, ``dismiss``,
        ``reapprove`` (``version``, by default the operation's; ``expires_at``), allow-attempt."""
        if receipt is not None:
            check_receipt(receipt)
            receipt = self._redact_receipt(receipt)
        if version is not None:
            check_id(version, "version")
        note = self.unit.redact(check_note(note))[:MAX_NOTE_LENGTH]
        retry_by = operator_actor(operator) if retry else None
        work = resolution_work(hold_id, action, note, receipt, (version, expires_at), retry_by)
        return Call(self.unit, work, operator_actor(operator))

    def update_hold(
        self,
        hold_id: int,
        *,
        operator: str,
        note: str,
        owner: str | None = None,
        deadline: datetime | None = None,
        next_action: str | None = None,
        extend_by: timedelta | None = None,
    ) -> Call[None]:
        """Assign, extend the deadline (to ``deadline`` or by ``extend_by``; never earlier),
        set the next action, or just add a note."""
        note = self.unit.redact(check_note(note).strip())[:MAX_NOTE_LENGTH]
        if not note:
            raise IllegalTransition("a note is required", code="note_required")
        actor = operator_actor(operator)
        if owner is not None:
            check_id(owner, "owner")
        next_action = self._redacted(next_action, MAX_NEXT_ACTION_LENGTH)
        work = update_work(
            hold_id,
            note,
            owner=owner,
            deadline=deadline,
            next_action=next_action,
            extend_by=extend_by,
        )
        return Call(self.unit, work, actor)
