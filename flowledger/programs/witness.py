"""``flowledger witness serve``: a C2SP ``tlog-witness`` that a team other than the ledger's
runs on a machine of its own. ``POST /add-checkpoint`` checks the log's signature and the
consistency proof from the size it last cosigned, stores the new checkpoint and answers its
cosignature (C2SP ``tlog-cosignature``, Ed25519); ``GET /<sha256(origin) in hex>/checkpoint``
serves the latest checkpoint it cosigned, the log's signature and its own on it.

It trusts only the log keys it is given, keeps nothing but its state file, and needs nothing
of the ledger's database: a ledger that rewrites, forks, truncates or restores its log gets a
409 or a 422 here instead of a cosignature, and cannot make the witness forget.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence

import anyio
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from flowledger.domain.checkpoints import Checkpoint, VerifierKey
from flowledger.domain.cosignatures import Cosigner
from flowledger.domain.witnessing import (
    MAX_BODY,
    SIZE_TYPE,
    Refused,
    check_submission,
    parse_submission,
)
from flowledger.storage.witness_state import WitnessState

log = logging.getLogger("flowledger.witness")


def _text(status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> Response:
    return Response(text.encode(), status, headers={"content-type": content_type})


def create_witness_app(
    state: WitnessState,
    cosigner: Cosigner,
    logs: Sequence[VerifierKey],
    *,
    clock: Callable[[], float] = time.time,
) -> Starlette:
    """The witness's HTTP app, trusting ``logs`` (each key signs the log its name is the
    origin of)."""
    trusted: dict[str, list[VerifierKey]] = {}
    for key in logs:
        trusted.setdefault(key.name, []).append(key)

    def add(body: bytes) -> str:
        sub = parse_submission(body)
        origin = sub.note.split("\n", 1)[0]

        def decide(latest: Checkpoint | None) -> tuple[Checkpoint, str]:
            cp = check_submission(sub, trusted, latest)
            line = cosigner.cosign(cp.text(), int(clock()))
            return cp, sub.note + line

        note = state.advance(origin, decide)
        return note[len(sub.note) :]

    async def add_checkpoint(request: Request) -> Response:
        try:
            body = await _body(request)
            line = await anyio.to_thread.run_sync(add, body)
        except Refused as refused:
            if refused.status in (409, 422):
                # Possible evidence of a log's misbehaviour: kept in the witness's log.
                log.warning("refused a checkpoint (%d): %s", refused.status, refused.reason)
            if refused.status == 409:
                return _text(409, f"{refused.size}\n", SIZE_TYPE)
            return _text(refused.status, refused.reason[:500] + "\n")
        except ClientDisconnect:
            return _text(400, "the request body did not arrive\n")
        return _text(200, line)

    async def checkpoint(request: Request) -> Response:
        wanted = request.path_params["origin_hash"]
        for origin in trusted:
            if hashlib.sha256(origin.encode()).hexdigest() == wanted:
                note = await anyio.to_thread.run_sync(state.latest, origin)
                if note is not None:
                    return _text(200, note)
        return _text(404, "this witness has cosigned no checkpoint of that log\n")

    async def healthz(request: Request) -> Response:
        return _text(200, "ok\n")

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
            Route("/{origin_hash:str}/checkpoint", checkpoint, methods=["GET"]),
        ]
    )


async def _body(request: Request) -> bytes:
    """The body, read no further than :data:`MAX_BODY` (413 beyond it, whatever the
    Content-Length says)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY:
        raise Refused(413, f"the request body is over {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise Refused(413, f"the request body is over {MAX_BODY} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
