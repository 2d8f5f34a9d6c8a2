"""Read routes: one operation with its events, operations by state and hold, and the kept
copies of executions. Every list is keyset-paged (``after`` + ``limit``), never loaded whole."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from flowledger.domain import Reason, State
from flowledger.receiver.api.bounded import read
from flowledger.receiver.api.deps import OperationId, require, state_of
from flowledger.receiver.api.errors import ApiError, documented
from flowledger.receiver.api.paths import check_raw_path
from flowledger.receiver.api.schemas import (
    ExecutionPage,
    Id,
    OperationDetailPublic,
    OperationPage,
    TokenPublic,
)
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.storage.reads import execution_copies as executions
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records

router = APIRouter(prefix="/v1", tags=["reads"])
Reader = Annotated[Principal, Depends(require("read"))]
Caller = Annotated[Principal, Depends(require("any"))]
St = Annotated[ReceiverState, Depends(state_of)]
Limit = Annotated[int, Query(ge=1, le=500)]
HoldFilter = Literal["open", "blocking", "none"] | Reason
Text200 = Annotated[Id, Query()]


READ_ERRORS = (401, 403, 408, 413, 422, 429, 503)


@router.get(
    "/operations/{operation_id:path}",
    response_model=OperationDetailPublic,
    responses=documented(*READ_ERRORS, 404, 405),
)
async def get_operation(
    operation_id: OperationId, principal: Reader, st: St, request: Request
) -> dict[str, Any]:
    """The operation with its attempts, receipts, holds, events (oldest first, up to 500)
    and linked executions (each once, with how it is linked).
    An id ending in ``/dispatch``, ``/prepare``, ``/confirm`` or ``/fail`` cannot be read
    here: those paths are the workflow calls, and GET on them is 405."""
    check_raw_path(request.scope)  # ``a%ffb`` is refused, never read as ``a\ufffdb``
    detail = await read(st.read_deadline, records.operation_detail, st.store, operation_id)
    if detail is None:
        raise ApiError(404, "not_found", f"no operation {operation_id!r}")
    return {
        "operation": detail.operation,
        "attempts": detail.attempts,
        "receipts": detail.receipts,
        "holds": detail.holds,
        "events": detail.events,
        "executions": detail.executions,
        "retries": detail.retries,
    }


@router.get("/operations", response_model=OperationPage, responses=documented(*READ_ERRORS))
async def list_operations(
    principal: Reader,
    st: St,
    state: State | None = None,
    hold: Annotated[
        HoldFilter | None,
        Query(description="open, blocking, none, or a hold reason (open holds only)"),
    ] = None,
    after: Text200 | None = None,
    limit: Limit = 100,
) -> dict[str, Any]:
    """Operations by id, ``limit`` at a time after the id ``after``."""
    rows = await read(
        st.read_deadline,
        operations.by_id,
        st.store,
        state=state.value if state is not None else None,
        hold=str(hold) if hold is not None else None,
        after=after,
        limit=limit,
    )
    more = len(rows) == limit
    return {"items": rows, "next_after": rows[-1]["operation_id"] if more else None}


@router.get("/executions", response_model=ExecutionPage, responses=documented(*READ_ERRORS))
async def list_executions(
    principal: Reader,
    st: St,
    source: Text200 | None = None,
    status: Text200 | None = None,
    gone: Annotated[bool | None, Query(description="only pruned (true) or present (false)")] = None,
    after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Limit = 100,
) -> dict[str, Any]:
    """The ledger's copies of execution records, pruned ones (``gone_at`` set) included."""
    rows = await read(
        st.read_deadline,
        executions.by_id,
        st.store,
        source=source,
        status=status,
        gone=gone,
        after=after,
        limit=limit,
    )
    more = len(rows) == limit
    return {"items": rows, "next_after": rows[-1]["id"] if more else None}


@router.get(
    "/token",
    response_model=TokenPublic,
    tags=["tokens"],
    responses=documented(401, 408, 413, 429, 503),
)
async def calling_token(principal: Caller) -> dict[str, Any]:
    """The token that sent this request: its name, scope and whether it signs. Any valid
    token may ask; a client's connection test calls it to tell a bad token (401) from one
    with the wrong scope."""
    return {
        "name": principal.name,
        "scope": principal.scope,
        "signing": principal.signing_salt is not None,
    }
