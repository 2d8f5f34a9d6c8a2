"""Two ASGI layers around the app: the body limit, and request latency by route.

The body limit is enforced while the body streams in, not by trusting ``Content-Length``: a
chunked or lying request is cut off at the limit with 413 before the app sees a byte of it,
and a body that ends early (the client went away) reaches no route at all, so nothing is
written for it.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ledger.metrics import REQUEST_LATENCY
from ledger.receiver.errors import ApiError
from ledger.receiver.reply import Reply


async def _send_error(send: Send, status: int, code: str, message: str) -> None:
    error = ApiError(status, code, message, headers={"Connection": "close"})
    await Reply.error(error).send(send)


class BodyLimit:
    """Read the whole body up to ``limit`` bytes, then hand it to the app in one piece."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = f"the body is over the limit of {self.limit} bytes"
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _send_error(send, 413, "body_too_large", too_big)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the body never arrived whole: no route runs, nothing is written
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await _send_error(send, 413, "body_too_large", too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class Timing:
    """Observe each request's latency under its route template (never its raw path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_and_note(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route: Any = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            REQUEST_LATENCY.labels(template, scope.get("method", "?"), str(status[0])).observe(
                time.perf_counter() - started
            )
