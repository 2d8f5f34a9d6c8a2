"""The calls a workflow makes around each write: dispatch, prepare, confirm, fail, and the
n8n error hook. Each route validates, builds one unit of work in the services, and hands it to
the writer; the answer is sent only after the unit's commit is durable."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response

from ledger.metrics import DISPATCH_DECISIONS
from ledger.receiver.auth import require
from ledger.receiver.errors import as_api_error
from ledger.receiver.idempotency import answer
from ledger.receiver.schemas import (
    AnswerPublic,
    ConfirmCreate,
    DispatchCreate,
    FailCreate,
    HookPublic,
    Id,
    N8nErrorCreate,
    PrepareCreate,
)
from ledger.receiver.state import ReceiverState, state_of
from ledger.receiver.tokens import Principal
from ledger.services import Answer

router = APIRouter(prefix="/v1", tags=["workflow calls"])

Writer = Annotated[Principal, Depends(require("write"))]
State = Annotated[ReceiverState, Depends(state_of)]
OperationId = Annotated[Id, Path(description="The workflow's stable operation id")]
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "no, unknown or revoked token; bad or stale signature"},
    403: {"description": "the token's scope does not cover this route"},
    409: {"description": "illegal transition, or the Idempotency-Key is running"},
    413: {"description": "body over the limit"},
    422: {"description": "invalid input, or an Idempotency-Key reused with another body"},
}


def _build(make: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a services ``*_work`` builder, mapping its input checks to HTTP errors."""
    try:
        return make(*args, **kwargs)
    except Exception as exc:
        raise as_api_error(exc) from None


@router.post(
    "/operations/{operation_id:path}/dispatch", response_model=AnswerPublic, responses=ERRORS
)
async def dispatch(
    operation_id: OperationId,
    body: DispatchCreate,
    request: Request,
    principal: Writer,
    st: State,
) -> Response:
    """May this execution write now? Always 200 with ``decision`` go, skip or hold."""
    work = _build(st.ledger.dispatch_work, operation_id, body.to_input())
    reply = await answer(st, request, principal, work)
    if isinstance(reply.value, Answer):
        DISPATCH_DECISIONS.labels(reply.value.decision or "go", reply.value.reason or "").inc()
    return reply.response()


@router.post(
    "/operations/{operation_id:path}/prepare", response_model=AnswerPublic, responses=ERRORS
)
async def prepare(
    operation_id: OperationId,
    body: PrepareCreate,
    request: Request,
    principal: Writer,
    st: State,
) -> Response:
    """Record the input and processing version without claiming the operation."""
    work = _build(
        st.ledger.prepare_work,
        operation_id,
        processing_version=body.processing_version,
        input=body.input,
        has_input=body.has_input,
        input_hash=body.input_hash,
        workflow_id=body.workflow_id,
        step=body.step,
        source=body.source,
        input_ref=body.input_ref,
    )
    return (await answer(st, request, principal, work)).response()


@router.post(
    "/operations/{operation_id:path}/confirm", response_model=AnswerPublic, responses=ERRORS
)
async def confirm(
    operation_id: OperationId,
    body: ConfirmCreate,
    request: Request,
    principal: Writer,
    st: State,
) -> Response:
    """The write succeeded: record the target's receipt."""
    work = _build(
        st.ledger.confirm_work,
        operation_id,
        body.receipt,
        execution_id=body.execution_id,
        detail=body.detail,
    )
    return (await answer(st, request, principal, work)).response()


@router.post("/operations/{operation_id:path}/fail", response_model=AnswerPublic, responses=ERRORS)
async def fail(
    operation_id: OperationId,
    body: FailCreate,
    request: Request,
    principal: Writer,
    st: State,
) -> Response:
    """The write failed (``rejected``: nothing was written) or nobody can tell (``unknown``:
    a blocking hold is opened for a person)."""
    work = _build(
        st.ledger.fail_work,
        operation_id,
        body.outcome,
        body.error,
        execution_id=body.execution_id,
    )
    return (await answer(st, request, principal, work)).response()


def _hook_answer(execution_id: str | None) -> Any:
    def render(opened: list[tuple[str, int | None]]) -> dict[str, Any]:
        return {
            "execution_id": execution_id,
            "matched": len(opened),
            "holds": [{"operation_id": op, "hold_id": hold} for op, hold in opened],
        }

    return render


@router.post("/hooks/n8n/error", response_model=HookPublic, responses=ERRORS, tags=["hooks"])
async def n8n_error(
    body: N8nErrorCreate, request: Request, principal: Writer, st: State
) -> Response:
    """Point an n8n error workflow's HTTP Request here with what its Error Trigger received.
    Every operation that this execution left ``dispatching`` gets a blocking
    ``execution_failed`` hold at once. Only ids, names, ``lastNodeExecuted`` and the error's
    name, message and httpCode are kept; ``error.context`` and the stack are dropped."""
    execution_id = body.execution.id if body.execution is not None else None
    if execution_id is None:
        work: Any = lambda tx: []  # noqa: E731  (an error in a trigger: no execution to match)
    else:
        work = _build(st.ledger.execution_failed_work, execution_id, body.detail())
    reply = await answer(st, request, principal, work, render=_hook_answer(execution_id))
    return reply.response()
