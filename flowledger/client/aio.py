"""The client for asyncio (a Prefect flow, an async worker): :class:`AsyncLedger` and its
:class:`AsyncGuard`, the same calls and rules as :mod:`flowledger.client.sync`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import httpx

from flowledger.client import calls, guarded
from flowledger.client.errors import Held, LedgerError, ReceiptConflict, Unfinished
from flowledger.client.guarded import Dispatch


class AsyncLedger(guarded.Guards["AsyncGuard"]):
    """The ledger at ``url`` (else ``FLOWLEDGER_URL``), called with ``token`` (else
    ``FLOWLEDGER_TOKEN``), every request signed when ``signing_secret`` (else
    ``FLOWLEDGER_SIGNING_SECRET``) is given. ``transport`` is httpx's (a
    ``httpx.MockTransport`` in tests). Close it, or use it as a context manager."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        signing_secret: str | None = None,
        timeout: float = 10.0,
        tries: int = 4,
        first_wait: float = 0.5,
        hash_inputs: bool = False,
        input_secret: bytes | str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = calls.settings(
            url,
            token,
            signing_secret,
            timeout=timeout,
            tries=tries,
            first_wait=first_wait,
            input_secret=input_secret,
            hash_inputs=hash_inputs,
        )
        self._http = httpx.AsyncClient(transport=transport, timeout=timeout)
        self._sleep = sleep
        self._clock = clock

    async def __aenter__(self) -> AsyncLedger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _guard(self, dispatch: Dispatch) -> AsyncGuard:
        return AsyncGuard(self, dispatch)

    async def token_info(self) -> dict[str, Any]:
        """``GET /v1/token``: the token's name, scope and whether it signs (a connection
        test)."""
        return await self.call("GET", "/v1/token", None, None)

    async def call(
        self, method: str, path: str, body: dict[str, Any] | None, key: str | None
    ) -> dict[str, Any]:
        """:meth:`exchange`'s answer."""
        return (await self.exchange(method, path, body, key)).answer

    async def exchange(
        self, method: str, path: str, body: dict[str, Any] | None, key: str | None
    ) -> calls.Reply:
        """One call, retried (same key, a fresh signature) on no answer, 5xx, 429 and a 409
        for a key still running; any other error raises :class:`LedgerError` at once."""
        cfg = self.settings
        content = calls.body_bytes(body)
        stamp = calls.Stamp()
        wait = cfg.first_wait
        last: LedgerError | None = None
        for attempt in range(cfg.tries):
            if attempt:
                await self._sleep(wait)
                wait *= 2
            built = calls.request(
                self._http, cfg, method, path, content, key, stamp.next(self._clock())
            )
            try:
                response = await self._http.send(built)
            except httpx.TransportError as exc:
                last = calls.unreachable(exc, cfg.url)
                continue
            if response.is_success:
                return calls.reply_of(response, cfg.url, first_try=attempt == 0)
            last = calls.refusal(response, cfg.url)
            if not calls.worth_retrying(response.status_code, last.code):
                raise last
        assert last is not None
        raise calls.after_tries(last, cfg.tries)

    async def hold_id(self, operation_id: str, reason: str) -> int | None:
        """The open hold of ``reason`` on the operation, when this token may read it."""
        try:
            operation = await self.call("GET", calls.operation_path(operation_id), None, None)
        except LedgerError:
            return None
        return guarded.open_hold_id(operation, reason)


class AsyncGuard(guarded.GuardState):
    """One guarded write (:meth:`AsyncLedger.guard`). After entering: ``go`` (write, then
    confirm or fail), or ``skip`` (written already: ``receipt``); a hold raised
    :class:`Held`. An exception in the block after ``go`` is recorded as ``fail``:
    ``rejected`` for :class:`Rejected`, ``unknown`` for any other (a person looks)."""

    def __init__(self, ledger: AsyncLedger, dispatch: Dispatch) -> None:
        super().__init__(dispatch)
        self.ledger = ledger

    async def _post(self, call: str, body: dict[str, Any], *, keyed: bool = True) -> dict[str, Any]:
        path = calls.operation_path(self.operation_id, call)
        return await self.ledger.call(
            "POST", path, body, self.dispatch.key(call) if keyed else None
        )

    async def __aenter__(self) -> AsyncGuard:
        path = calls.operation_path(self.operation_id, "dispatch")
        key = self.dispatch.key("dispatch")
        reply = await self.ledger.exchange("POST", path, self.dispatch.body, key)
        self.answer = reply.answer
        if self.go and reply.replayed_earlier:
            await self._earlier_go()
        if self.decision == "hold":
            reason = str(self.answer.get("reason") or "hold")
            raise guarded.held(
                self.operation_id, self.answer, await self.ledger.hold_id(self.operation_id, reason)
            )
        return self

    async def _earlier_go(self) -> None:
        """This execution and run were told ``go`` for the operation by an earlier guard (a
        run started again under the same id, the same operation twice in one run): what that
        one wrote is unknown here, so nothing is written, and the ledger is told the outcome
        is unknown (it holds the operation for a person)."""
        body = guarded.fail_body(self.dispatch, False, guarded.EARLIER_GO)
        try:
            await self._post("fail", body)
        except LedgerError as exc:
            raise guarded.earlier_go_finished(self.operation_id, exc) from exc
        finally:
            self.finished = True
        raise Held(self.operation_id, "unknown_outcome")

    async def confirm(self, receipt: object, *, detail: str | None = None) -> dict[str, Any]:
        """Record the target's reference for the write. A confirm whose answer was lost is
        sent again with the same key; one that conflicts with an earlier receipt raises
        :class:`ReceiptConflict` (the ledger holds it: a possible duplicate write)."""
        self._check_go("confirm")
        answer = await self._post("confirm", guarded.confirm_body(self.dispatch, receipt, detail))
        self.finished = True
        if answer.get("reason") == "receipt_conflict":
            raise ReceiptConflict(
                f"flowledger holds {self.operation_id}: receipt_conflict (confirmed with "
                "another receipt before: a possible duplicate write)",
                code="receipt_conflict",
            )
        return answer

    async def fail(self, error: object = None, *, rejected: bool = False) -> dict[str, Any]:
        """Record that the write failed: ``rejected=True`` only when the target refused it and
        nothing happened (it may be dispatched again); otherwise ``unknown``, held for a
        person."""
        self._check_go("fail")
        answer = await self._post("fail", guarded.fail_body(self.dispatch, rejected, error))
        self.finished = True
        return answer

    async def release(self, reason: str | None = None) -> dict[str, Any]:
        """Give the ``go`` back unwritten (the operation is ``prepared`` again, no hold): only
        when the write certainly did not start."""
        self._check_go("release")
        answer = await self._post(
            "release", guarded.release_body(self.dispatch, reason), keyed=False
        )
        self.finished = True
        return answer

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if not self.go or self.finished:
            return
        if error is not None:
            try:
                await self.fail(error, rejected=guarded.is_rejection(error))
            except LedgerError as exc:
                error.add_note(f"flowledger: the failure could not be recorded: {exc}")
            return
        await self.fail("the guarded block ended without confirm or fail")
        raise Unfinished(
            f"the guarded write of {self.operation_id} ended without confirm or fail: "
            "recorded as unknown, so a person looks"
        )
