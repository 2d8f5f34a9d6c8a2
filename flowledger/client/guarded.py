"""What a guarded write sends, shared by the sync and async guards: the checked dispatch, the
bodies of confirm, fail and release, each call's ``Idempotency-Key``, and how an exception
inside the block is recorded."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from flowledger.client.calls import Settings
from flowledger.client.errors import Held, InvalidCall, LedgerError, Rejected
from flowledger.client.rules import (
    MAX_ERROR_LENGTH,
    id_problem,
    idempotency_key,
    input_hash,
    operation_id_problem,
    receipt_problem,
)

# ``input=`` left out: distinct from ``input=None``, which the ledger counts as no input too.
NO_INPUT: Any = object()


@dataclass(frozen=True)
class Dispatch:
    """One guarded write's dispatch, checked before any call."""

    operation_id: str
    body: dict[str, Any]
    execution_id: str
    run_index: int
    workflow_id: str | None
    step: str | None

    def key(self, call: str) -> str:
        return idempotency_key(
            call,
            workflow_id=self.workflow_id,
            execution_id=self.execution_id,
            step=self.step,
            run_index=self.run_index,
            operation_id=self.operation_id,
        )


def instant(value: datetime | str | None, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise InvalidCall(f"{what} must carry a time zone (an aware datetime)", field=what)
    return value.isoformat()


def dispatch(
    cfg: Settings,
    operation_id: str,
    *,
    input: Any,
    input_hash_: str | None,
    version: str,
    execution_id: str,
    run_index: int,
    workflow_id: str | None,
    step: str | None,
    source: str | None,
    deadline: datetime | str | None,
    approval_version: str | None,
    approval_expires_at: datetime | str | None,
    input_ref: str | None,
    hash_input: bool | None,
) -> Dispatch:
    """The dispatch, or :class:`InvalidCall` naming what is missing: nothing is sent then."""
    problems = [
        (operation_id_problem(operation_id), "operation_id"),
        (id_problem(version, "version"), "version"),
        (id_problem(execution_id, "execution_id"), "execution_id"),
    ]
    for value, what in ((workflow_id, "workflow_id"), (step, "step"), (source, "source")):
        if value is not None:
            problems.append((id_problem(value, what), what))
    for problem, what in problems:
        if problem is not None:
            raise InvalidCall(problem, field=what)
    if isinstance(run_index, bool) or not isinstance(run_index, int) or run_index < 0:
        raise InvalidCall(f"run_index must be a whole number from 0, not {run_index!r}")
    given = input is not NO_INPUT and input is not None
    if given == (input_hash_ is not None):
        raise InvalidCall("give input= or input_hash=, exactly one", field="input")
    body: dict[str, Any] = {
        "processing_version": version,
        "execution_id": execution_id,
        "run_index": run_index,
        "workflow_id": workflow_id,
        "step": step,
        "source": source,
        "deadline": instant(deadline, "deadline"),
        "input_ref": input_ref,
    }
    if given and (cfg.hash_inputs if hash_input is None else hash_input):
        try:
            body["input_hash"] = input_hash(input, cfg.input_secret)
        except ValueError as exc:
            raise InvalidCall(f"the input cannot be hashed: {exc}", field="input") from exc
    elif given:
        body["input"] = input
    else:
        body["input_hash"] = input_hash_
    if approval_version is not None:
        body["approval"] = {
            "version": approval_version,
            "expires_at": instant(approval_expires_at, "approval_expires_at"),
        }
    return Dispatch(operation_id, body, execution_id, run_index, workflow_id, step)


def confirm_body(d: Dispatch, receipt: object, detail: str | None) -> dict[str, Any]:
    problem = receipt_problem(receipt)
    if problem is not None:
        raise InvalidCall(problem, field="receipt")
    return {"receipt": str(receipt), "execution_id": d.execution_id, "detail": detail}


def fail_body(d: Dispatch, rejected: bool, error: object) -> dict[str, Any]:
    text = describe(error) if isinstance(error, BaseException) else str(error or "")
    return {
        "outcome": "rejected" if rejected else "unknown",
        "error": text[:MAX_ERROR_LENGTH],
        "execution_id": d.execution_id,
    }


def release_body(d: Dispatch, reason: str | None) -> dict[str, Any]:
    return {
        "execution_id": d.execution_id,
        "run_index": d.run_index,
        "reason": (reason or "")[:MAX_ERROR_LENGTH] or None,
        "dispatch_key": d.key("dispatch"),
    }


EARLIER_GO = (
    "a guard of the same execution and run was told go for this operation before (the run "
    "started again under the same id, or the operation came twice in one run): what that one "
    "wrote is unknown, and this one wrote nothing"
)


def earlier_go_finished(operation_id: str, refusal: LedgerError) -> LedgerError:
    """The error when an earlier guard of the same run had finished the operation (confirmed
    or failed it): nothing is written again, and a new run (another execution id or run
    index) finds out where it stands."""
    return LedgerError(
        f"{operation_id}: this execution and run were told go for it before and it was "
        f"finished since; nothing written again ({refusal})",
        code="earlier_go",
    )


def describe(error: BaseException) -> str:
    """The exception's type and message: what a person needs to start looking, never its
    traceback or arguments beyond the message."""
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def is_rejection(error: BaseException) -> bool:
    return isinstance(error, Rejected)


def held(operation_id: str, answer: dict[str, Any], hold_id: int | None) -> Held:
    return Held(operation_id, str(answer.get("reason") or "hold"), hold_id)


def open_hold_id(operation: dict[str, Any], reason: str) -> int | None:
    """The open hold of ``reason`` in ``GET /v1/operations/{id}``'s answer, if any."""
    for hold in operation.get("holds") or []:
        if (
            isinstance(hold, dict)
            and hold.get("reason") == reason
            and hold.get("resolved_at") is None
            and isinstance(hold.get("id"), int)
        ):
            return int(hold["id"])
    return None


G = TypeVar("G")


class Guards(Generic[G]):
    """What the sync and async ledgers share: making a guard, checked before any call."""

    settings: Settings

    def guard(
        self,
        operation_id: str,
        *,
        input: Any = NO_INPUT,
        input_hash: str | None = None,
        version: str,
        execution_id: str,
        run_index: int = 0,
        workflow_id: str | None = None,
        step: str | None = None,
        source: str | None = None,
        deadline: datetime | str | None = None,
        approval_version: str | None = None,
        approval_expires_at: datetime | str | None = None,
        input_ref: str | None = None,
        hash_input: bool | None = None,
    ) -> G:
        """A guarded write: entering it dispatches (and raises :class:`Held` on ``hold``);
        ``g.go`` says to write, then ``g.confirm(receipt)`` or ``g.fail(...)``. Checked here,
        before any call (:class:`InvalidCall`). ``input`` is sent for the ledger to hash,
        or hashed here (``hash_input``, else the ledger's ``hash_inputs``); ``input_hash``
        is a hash made already."""
        return self._guard(
            dispatch(
                self.settings,
                operation_id,
                input=input,
                input_hash_=input_hash,
                version=version,
                execution_id=execution_id,
                run_index=run_index,
                workflow_id=workflow_id,
                step=step,
                source=source,
                deadline=deadline,
                approval_version=approval_version,
                approval_expires_at=approval_expires_at,
                input_ref=input_ref,
                hash_input=hash_input,
            )
        )

    def _guard(self, dispatch: Dispatch) -> G:
        raise NotImplementedError


class GuardState:
    """A guard's dispatch and the ledger's answer to it."""

    def __init__(self, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        self.operation_id = dispatch.operation_id
        self.answer: dict[str, Any] = {}
        self.finished = False

    @property
    def decision(self) -> str | None:
        return self.answer.get("decision")

    @property
    def go(self) -> bool:
        return self.decision == "go"

    @property
    def skip(self) -> bool:
        return self.decision == "skip"

    @property
    def receipt(self) -> str | None:
        """The receipt the write was confirmed with (on ``skip``)."""
        return self.answer.get("receipt")

    @property
    def attempt(self) -> int | None:
        return self.answer.get("attempt")

    def _check_go(self, call: str) -> None:
        if not self.go:
            raise InvalidCall(f"{call} after {self.decision!r}: only a go is confirmed or failed")
