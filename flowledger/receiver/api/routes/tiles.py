"""The log as C2SP ``tlog-tiles`` over HTTP, read only, for read tokens: ``/v1/tlog/checkpoint``
(signed now) and ``/v1/tlog/tile/L/N[.p/W]``, ``/v1/tlog/tile/entries/N[.p/W]`` read from the
stored tree, so a tiles client (Go's ``golang.org/x/mod/sumdb/tlog``, the witnesses') can be
pointed at ``/v1/tlog/`` with the read token as its bearer. A full tile never changes and says
so to caches; a partial one and the checkpoint are asked for afresh. Answered only when the
receiver has a signing key (``[checkpoints] key``), as the other proof routes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from flowledger.domain.tiles import TileError, parse_tile_path
from flowledger.receiver.api.bounded import read
from flowledger.receiver.api.deps import require, state_of
from flowledger.receiver.api.errors import ApiError, documented
from flowledger.receiver.api.routes.proofs import signed_now, signer_of
from flowledger.receiver.api.state import ReceiverState
from flowledger.receiver.api.tokens import Principal
from flowledger.storage.reads import tree_proofs as proofs

router = APIRouter(prefix="/v1/tlog", tags=["proofs"])
Reader = Annotated[Principal, Depends(require("read"))]
St = Annotated[ReceiverState, Depends(state_of)]
ERRORS = (401, 403, 404, 408, 429, 503)
# A full tile is the same bytes forever (C2SP tlog-tiles); a cache may keep it a year.
FOREVER = "max-age=31536000, immutable"
TEXT: dict[int | str, dict[str, Any]] = {
    "200": {"content": {"text/plain": {}}, "description": "The signed note"}
}
BYTES: dict[int | str, dict[str, Any]] = {
    "200": {"content": {"application/octet-stream": {}}, "description": "The tile"}
}


@router.get("/checkpoint", response_class=Response, responses={**TEXT, **documented(*ERRORS)})
async def get_tlog_checkpoint(principal: Reader, st: St) -> Response:
    """The tree's head, signed now: the C2SP checkpoint a tiles client starts from, with the
    cosignatures its witnesses gave the same checkpoint, when they have."""
    note = await read(st.read_deadline, signed_now, st.store, signer_of(st))
    return Response(
        note, media_type="text/plain; charset=utf-8", headers={"Cache-Control": "no-cache"}
    )


@router.get(
    "/tile/{path:path}", response_class=Response, responses={**BYTES, **documented(*ERRORS)}
)
async def get_tile(path: str, principal: Reader, st: St) -> Response:
    """A tile (``L/N[.p/W]``) or an entry bundle (``entries/N[.p/W]``), once the tree has it."""
    signer_of(st)  # without signed checkpoints, tiles would check against nothing
    try:
        tile = parse_tile_path(f"tile/{path}")
    except TileError as exc:
        raise ApiError(404, "not_a_tile", str(exc)) from None
    found = await read(st.read_deadline, proofs.tile, st.store, tile)
    if found is None:
        raise ApiError(404, "not_found", f"the log has no {tile.path()} yet")
    cache = FOREVER if tile.full else "no-cache"
    return Response(found, media_type="application/octet-stream", headers={"Cache-Control": cache})
