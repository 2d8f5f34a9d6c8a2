"""What an auditor's tools read over HTTP: the signed checkpoint of the tree, and an
operation's events with their inclusion proofs against a new one (the file ``flowledger
proof`` writes, which ``python -m flowledger.programs.verify_proof`` checks). For read tokens;
answered only when the receiver has a signing key (``[checkpoints] key``).

Registered before the read routes: ``/operations/{id}/proof`` is this route's, so an
operation whose id ends in ``/proof`` is read with ``GET /v1/operations/{id}``'s JSON only up
to that suffix, as ids ending in a workflow call's name are."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BeforeValidator, Field

from flowledger.domain.checkpoints import Signer, unverified_checkpoint
from flowledger.domain.proofs import b64
from flowledger.receiver.api.bounded import read
from flowledger.receiver.api.deps import OperationId, require, state_of
from flowledger.receiver.api.errors import ApiError, documented
from flowledger.receiver.api.paths import check_raw_path
from flowledger.receiver.api.schemas.proofs import (
    CheckpointPublic,
    ConsistencyPublic,
    ProofPublic,
    RangeProofPublic,
)
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.problems import Missing
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.reads.witnesses import with_cosignatures

router = APIRouter(prefix="/v1", tags=["proofs"])
Reader = Annotated[Principal, Depends(require("read"))]
St = Annotated[ReceiverState, Depends(state_of)]
ERRORS = (401, 403, 404, 408, 413, 422, 429, 503)


def signer_of(st: ReceiverState) -> Signer:
    if st.signer is None:
        raise ApiError(
            404, "no_signing_key", "this ledger signs no checkpoints: [checkpoints] key is unset"
        )
    return st.signer


def signed_now(store: Store, signer: Signer) -> str:
    """The tree's head signed now, with the cosignatures the witnesses gave the same
    checkpoint, when they have."""
    return with_cosignatures(store, proofs.signed_checkpoint(store, signer))


@router.get("/checkpoint", response_model=CheckpointPublic, responses=documented(*ERRORS))
async def get_checkpoint(principal: Reader, st: St) -> dict[str, Any]:
    """The Merkle tree's head, signed now: a C2SP checkpoint in a signed note (with the
    cosignatures its witnesses gave the same checkpoint, when they have), and its fields."""
    note = await read(st.read_deadline, signed_now, st.store, signer_of(st))
    cp = unverified_checkpoint(note)
    return {"origin": cp.origin, "size": cp.size, "root": b64([cp.root])[0], "checkpoint": note}


@router.get(
    "/operations/{operation_id:path}/proof",
    response_model=ProofPublic,
    responses=documented(*ERRORS),
)
async def get_operation_proof(
    operation_id: OperationId, principal: Reader, st: St, request: Request
) -> dict[str, Any]:
    """The operation's events with their inclusion proofs against a checkpoint signed now."""
    check_raw_path(request.scope)
    signer = signer_of(st)

    def proof() -> dict[str, Any]:
        note = signed_now(st.store, signer)
        try:
            return proofs.operation_proof(st.store, operation_id, note)
        except LedgerError as exc:
            raise ApiError(404, "not_found", str(exc)) from None

    return await read(st.read_deadline, proof)


def _digits(value: Any) -> Any:
    """Only ASCII digits make a number here: ``int`` would read ``2.0``, ``+2`` and other
    scripts' digits as well."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in the digits 0-9")
    return value


# A tree size, and an event's number, as a request gives them: below 2**63 (the database's
# integers), in ASCII digits (the constraints inside the type, where the schema shows them).
Digits = BeforeValidator(_digits)
Size = Annotated[int, Field(ge=0, le=2**63 - 1), Digits]
Seq = Annotated[int, Field(ge=1, le=2**63 - 1), Digits]


@router.get("/events/{first}/proof", response_model=RangeProofPublic, responses=documented(*ERRORS))
async def get_events_proof(
    principal: Reader,
    st: St,
    first: Annotated[Seq, Path(description="The first event's number")],
    last: Annotated[Seq | None, Query(description="The last event's [default: first]")] = None,
) -> dict[str, Any]:
    """Events by their number in the log (whatever they concern: a token's creation, event 1)
    with their inclusion proofs against a checkpoint signed now; at most 100,000."""
    signer = signer_of(st)
    end = first if last is None else last
    if end < first or end - first >= proofs.MAX_EVENTS:
        # No such proof, as for events past the log: each number alone is well formed.
        raise ApiError(
            404,
            "not_found",
            f"no proof of events {first}-{end}: last must be first to first + "
            f"{proofs.MAX_EVENTS - 1}",
            "last",
        )

    def proof() -> dict[str, Any]:
        note = proofs.signed_checkpoint(st.store, signer)
        try:
            return proofs.range_proof(st.store, first, end, note)
        except LedgerError as exc:
            raise ApiError(404, "not_found", str(exc)) from None

    return await read(st.read_deadline, proof)


@router.get("/consistency", response_model=ConsistencyPublic, responses=documented(*ERRORS))
async def get_consistency(
    principal: Reader, st: St, old: Annotated[Size, Query()], new: Annotated[Size, Query()]
) -> dict[str, Any]:
    """The RFC 9162 proof that the tree of ``old`` events is a prefix of the tree of ``new``
    (two sizes the log has had), with both roots, for a reader holding checkpoints of both."""

    def proof() -> dict[str, Any]:
        try:
            return proofs.size_consistency(st.store, old, new)
        except Missing as exc:
            raise ApiError(404, "not_found", str(exc)) from None

    return await read(st.read_deadline, proof)
