"""The calls a workflow makes around each write: dispatch, prepare, confirm, fail, release and
the n8n error hook. Each is one row of :data:`CALLS`: where it is posted, the body it accepts
and how that body becomes one unit of work in the services. Their routes
(:mod:`flowledger.receiver.api.routes.calls`) serve and document these rows; a validated call
crosses to the writer as a :class:`CallRequest`. No web framework here: the writer process
imports this module to build each call's unit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

from flowledger.plumbing.metrics import dispatch_decision
from flowledger.receiver.api.schemas.hooks import HookPublic, N8nErrorCreate
from flowledger.receiver.api.schemas.operations import (
    AnswerPublic,
    ConfirmCreate,
    DispatchCreate,
    FailCreate,
    PrepareCreate,
    ReleaseCreate,
)
from flowledger.services.ledger import Answer, Ledger
from flowledger.storage.unit_of_work import Guard, Work

OPERATION_PATH = "/v1/operations/{operation_id:path}"


@dataclass(frozen=True)
class Call:
    """One workflow call: where it is posted, what it accepts, what it does."""

    name: str
    path: str  # the route template, as documented and as labelled in the metrics
    body: type[BaseModel]
    # (ledger, operation id, body, the calling token's id) -> unit
    work: Callable[[Ledger, str | None, Any, int], Work]
    doc: str
    response: type[BaseModel] = AnswerPublic
    tag: str = "workflow calls"
    observe: Callable[[Any], None] | None = None  # sees the value a committed unit returned

    @property
    def has_operation(self) -> bool:
        return "{operation_id" in self.path


def _dispatch(ledger: Ledger, operation_id: str | None, body: DispatchCreate, _token: int) -> Work:
    assert operation_id is not None
    return ledger.dispatch(operation_id, body.to_input()).work


def _count_decision(value: Any) -> None:
    if isinstance(value, Answer):
        dispatch_decision(value.decision or "go", value.reason or "").inc()


def _prepare(ledger: Ledger, operation_id: str | None, body: PrepareCreate, _token: int) -> Work:
    assert operation_id is not None
    return ledger.prepare(
        operation_id,
        processing_version=body.processing_version,
        input=body.input,
        has_input=body.has_input,
        input_hash=body.input_hash,
        workflow_id=body.workflow_id,
        step=body.step,
        source=body.source,
        input_ref=body.input_ref,
    ).work


def _confirm(ledger: Ledger, operation_id: str | None, body: ConfirmCreate, _token: int) -> Work:
    assert operation_id is not None
    return ledger.confirm(
        operation_id, body.receipt, execution_id=body.execution_id, detail=body.detail
    ).work


def _fail(ledger: Ledger, operation_id: str | None, body: FailCreate, _token: int) -> Work:
    assert operation_id is not None
    return ledger.fail(operation_id, body.outcome, body.error, execution_id=body.execution_id).work


def _release(ledger: Ledger, operation_id: str | None, body: ReleaseCreate, token: int) -> Work:
    assert operation_id is not None
    forget = (token, body.dispatch_key) if body.dispatch_key is not None else None
    return ledger.release(
        operation_id,
        execution_id=body.execution_id,
        run_index=body.run_index,
        reason=body.reason,
        forget=forget,
    ).work


def _n8n_error(ledger: Ledger, operation_id: str | None, body: N8nErrorCreate, _token: int) -> Work:
    execution_id = body.execution.id if body.execution is not None else None
    opened_by = (
        ledger.execution_failed(execution_id, body.detail()).work
        if execution_id is not None
        else None  # an error in a trigger: no execution to match
    )

    def work(tx: Any) -> dict[str, Any]:
        opened = opened_by(tx) if opened_by is not None else []
        return {
            "execution_id": execution_id,
            "matched": len(opened),
            "holds": [{"operation_id": op, "hold_id": hold} for op, hold in opened],
        }

    return work


CALLS: tuple[Call, ...] = (
    Call(
        "dispatch",
        f"{OPERATION_PATH}/dispatch",
        DispatchCreate,
        _dispatch,
        "May this execution write now? Always 200 with ``decision`` go, skip or hold.",
        observe=_count_decision,
    ),
    Call(
        "prepare",
        f"{OPERATION_PATH}/prepare",
        PrepareCreate,
        _prepare,
        "Record the input and processing version without claiming the operation.",
    ),
    Call(
        "confirm",
        f"{OPERATION_PATH}/confirm",
        ConfirmCreate,
        _confirm,
        "The write succeeded: record the target's receipt.",
    ),
    Call(
        "fail",
        f"{OPERATION_PATH}/fail",
        FailCreate,
        _fail,
        "The write failed (``rejected``: nothing was written) or nobody can tell "
        "(``unknown``: a blocking hold is opened for a person).",
    ),
    Call(
        "release",
        f"{OPERATION_PATH}/release",
        ReleaseCreate,
        _release,
        "The execution that dispatched the operation did not write it after all (an n8n "
        "Guard that stopped on another item's hold before passing this one on): the "
        "operation is ``prepared`` again, without a hold, and the attempt ends ``unsent``, "
        "which does not count against its attempts. Only the execution (and run index) that "
        "holds the current attempt may release it; a release of a ``prepared`` operation "
        "changes nothing. ``dispatch_key``, the dispatch's own ``Idempotency-Key``, removes "
        "its stored ``go``, so that the same dispatch sent again is answered afresh.",
    ),
    Call(
        "n8n_error",
        "/v1/hooks/n8n/error",
        N8nErrorCreate,
        _n8n_error,
        "Point an n8n error workflow's HTTP Request here with what its Error Trigger "
        "received. Every operation that this execution left ``dispatching`` gets a blocking "
        "``execution_failed`` hold at once. Only ids, names, ``lastNodeExecuted`` and the "
        "error's name, message and httpCode are kept; ``error.context`` and the stack are "
        "dropped.",
        response=HookPublic,
        tag="hooks",
    ),
)


BY_NAME: dict[str, Call] = {call.name: call for call in CALLS}


class CallRequest(NamedTuple):
    """One workflow call, validated, as the writer needs it to build and run its unit (in
    this process or in the writer process, where it arrives pickled). A named tuple: one is
    made and pickled per call, and a tuple is the cheapest of both."""

    call: str  # a name in :data:`CALLS`
    operation_id: str | None
    body: BaseModel
    actor: str
    token_id: int
    key: str | None  # the Idempotency-Key, checked
    fingerprint: str  # the request's hash, for a key
    ttl: float  # seconds an Idempotency-Key's answer is kept
    guard: Guard | None  # the signature, recorded once (:class:`~.auth.Once`: data, not a closure)
    observe: bool  # the answer's value is wanted back (the call has an ``observe``)


def work_of(ledger: Ledger, request: CallRequest) -> Work:
    """The services' unit for ``request`` (what they refuse it with, raised)."""
    return BY_NAME[request.call].work(ledger, request.operation_id, request.body, request.token_id)
