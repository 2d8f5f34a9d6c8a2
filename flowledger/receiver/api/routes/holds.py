"""The hold routes: the open holds (``GET /v1/holds``), one hold, and a person's actions on
one (``POST /v1/holds/{hold_id}/<action>``) for operator tokens, each the service call the
terminal UI and ``flowledger hold`` make (:mod:`flowledger.services.actions`), recorded as
``operator:<token name>``. A refusal is the domain's own words in the one error shape: 409
with its code (``illegal_transition``, ``already_resolved``, ``deadline_passed``…), 404 for
a hold that does not exist, 422 for a value the ledger refuses.

They are plain FastAPI routes: a person's actions are few. Sent with an
``Idempotency-Key`` (as a chat bot or a script retrying after a timeout does), an action is
done once: the same request again is not done again and answers the hold as it is then, with
``Idempotent-Replayed: true``; the key with another request is 422 ``idempotency_key_reused``.
Without a key, a decision sent twice is refused the second time (``already_resolved``), and an
assign, extend or note sent twice is recorded twice."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from flowledger.domain import IllegalTransition, Reason
from flowledger.receiver.api.bounded import read
from flowledger.receiver.api.deps import JsonBody, StrictJsonRoute, require, state_of
from flowledger.receiver.api.errors import ApiError, as_api_error, documented
from flowledger.receiver.api.idempotency import HEADER, key_of, request_hash, running_key
from flowledger.receiver.api.schemas.holds import (
    AssignCreate,
    ConfirmHoldCreate,
    DecisionCreate,
    ExtendCreate,
    HoldPage,
    HoldPublic,
    HoldReleaseCreate,
    NoteCreate,
    ReapproveCreate,
)
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.services import actions
from flowledger.services.actions import Values
from flowledger.services.values import InvalidInput
from flowledger.storage.reads import hold_queue as queue

router = APIRouter(prefix="/v1/holds", tags=["holds"], route_class=StrictJsonRoute)
Reader = Annotated[Principal, Depends(require("read"))]
Operator = Annotated[Principal, Depends(require("operator"))]
St = Annotated[ReceiverState, Depends(state_of)]
HoldId = Annotated[int, Path(ge=1, le=2**62, description="The hold's id")]
READ_ERRORS = (401, 403, 408, 413, 422, 429, 503)
# The body each action takes (a note always; the rest as the action needs).
BODIES: dict[str, type[DecisionCreate]] = {
    "confirm": ConfirmHoldCreate,
    "release": HoldReleaseCreate,
    "cancel": DecisionCreate,
    "dismiss": DecisionCreate,
    "reapprove": ReapproveCreate,
    "allow-attempt": DecisionCreate,
    "assign": AssignCreate,
    "extend": ExtendCreate,
    "note": NoteCreate,
}
_HOLD_FIELDS = tuple(HoldPublic.model_fields)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row.get(name) for name in _HOLD_FIELDS}


def _hold(st: ReceiverState, hold_id: int) -> dict[str, Any]:
    found = queue.hold(st.store, hold_id)
    if found is None:
        raise ApiError(404, "not_found", f"no hold {hold_id}")
    return _public(found)


@router.get("", response_model=HoldPage, responses=documented(*READ_ERRORS, 404))
async def list_holds(
    principal: Reader,
    st: St,
    reason: Reason | None = None,
    owner: Annotated[str | None, Query(max_length=200, description="owner contains this")] = None,
    overdue: Annotated[bool, Query(description="only holds past their deadline")] = False,
    after: Annotated[int | None, Query(ge=1, le=2**62, description="a hold's id")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """The open holds, soonest deadline first (the terminal UI's queue), ``limit`` at a
    time after the hold ``after``."""
    flt = queue.HoldFilter.of(reason=reason.value if reason else None, owner=owner, overdue=overdue)

    def page() -> list[dict[str, Any]]:
        last = queue.hold(st.store, after) if after is not None else None
        if after is not None and (last is None or last["resolved_at"] is not None):
            raise ApiError(404, "not_found", f"no open hold {after} to continue after")
        now = st.ledger.clock()
        return queue.hold_queue(st.store, now, flt=flt, limit=limit, after=last)

    rows = await read(st.read_deadline, page)
    more = len(rows) == limit
    return {"items": [_public(r) for r in rows], "next_after": rows[-1]["id"] if more else None}


@router.get("/{hold_id}", response_model=HoldPublic, responses=documented(*READ_ERRORS, 404))
async def get_hold(hold_id: HoldId, principal: Reader, st: St) -> dict[str, Any]:
    """One hold, open or resolved."""
    return await read(st.read_deadline, _hold, st, hold_id)


def _can_retry(st: ReceiverState, hold_id: int) -> None:
    """409 ``retry_not_possible`` unless the hold's execution is one n8n can retry."""
    found = queue.hold(st.store, hold_id)
    if found is None or found["resolved_at"] is not None:
        return  # the action's own refusal says it
    why = actions.retry_refusal(st.store, found)
    if why is not None:
        raise ApiError(409, "retry_not_possible", why, "retry")


def _endpoint(name: str) -> Any:
    """The route of action ``name``: its body as the action's values, one service call
    through the receiver's writer, the hold as it is afterwards."""

    async def act(
        hold_id: int,
        body: DecisionCreate,
        principal: Principal,
        json: None,
        st: ReceiverState,
        request: Request,
        response: Response,
    ) -> dict[str, Any]:
        # Read as the workflow calls read it, and like theirs not in the OpenAPI: a schema
        # cannot say that a key used once is refused with another request.
        key = key_of(request.headers.get(HEADER))
        if getattr(body, "retry", False):
            await read(st.read_deadline, _can_retry, st, hold_id)
        try:
            call = actions.call(st.ledger, name, hold_id, principal.name, Values(**dict(body)))
            with running_key(st, principal, key):
                if key is None:
                    await st.engine.commit(call.actor or "", call.work)
                elif await st.engine.commit_keyed(
                    call.actor or "",
                    call.work,
                    token_id=principal.token_id,
                    key=key,
                    fingerprint=request_hash("POST", request.url.path, await request.body()),
                    ttl=st.idempotency_ttl,
                ):
                    response.headers["Idempotent-Replayed"] = "true"
        except InvalidInput as exc:
            if exc.field != "deadline":
                raise as_api_error(exc) from None
            # A well-formed time the clock has passed: refused as the re-approval of an
            # expired approval is, for what the ledger's clock says now.
            raise ApiError(409, "deadline_passed", str(exc), "deadline") from None
        except IllegalTransition as exc:
            if exc.code != "deadline_in_past":
                raise as_api_error(exc) from None
            raise ApiError(409, "deadline_passed", str(exc), "deadline") from None
        except Exception as exc:
            raise as_api_error(exc) from None
        return await read(st.read_deadline, _hold, st, hold_id)

    kind = inspect.Parameter.KEYWORD_ONLY
    act.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("hold_id", kind, annotation=HoldId),
            inspect.Parameter("body", kind, annotation=BODIES[name]),
            inspect.Parameter("principal", kind, annotation=Operator),
            inspect.Parameter("json", kind, annotation=JsonBody),  # 415 after the token's 401
            inspect.Parameter("st", kind, annotation=St),
            inspect.Parameter("request", kind, annotation=Request),
            inspect.Parameter("response", kind, annotation=Response),
        ]
    )
    return act


for _name, _action in actions.ACTIONS.items():
    router.add_api_route(
        f"/{{hold_id}}/{_name}",
        _endpoint(_name),
        methods=["POST"],
        name=f"hold_{_name.replace('-', '_')}",
        summary=_action.title,
        description=f"{_action.title}, as the terminal UI and `flowledger hold ID {_name}` "
        "do; needs an operator token. Answers the hold as it is afterwards.",
        response_model=HoldPublic,
        responses=documented(400, 401, 403, 404, 405, 408, 409, 413, 415, 422, 429, 503),
    )
