"""Where the receiver's writes go: the group commit in a thread and, when asked for, the
writer process beside it, which then writes the workflow calls (the thread keeps the
receiver's other writes: they are rare, and SQLite's write lock serialises the two writers).
Started and closed with the app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from flowledger.config import LogFormat
from flowledger.receiver.api.calls import CallRequest
from flowledger.receiver.api.errors import as_api_error, late_write
from flowledger.receiver.api.reply import Reply
from flowledger.receiver.engine.committer import GroupCommitter
from flowledger.receiver.engine.idempotency import keyed
from flowledger.receiver.engine.units import reply_of, unit_of
from flowledger.receiver.engine.writer_process import WriterProcess
from flowledger.services.ledger import Ledger
from flowledger.storage.problems import LedgerError
from flowledger.storage.unit_of_work import Guard, Work


class Engine:
    """The receiver's engine, as the API sees it (:class:`flowledger.receiver.api.state.Engine`):
    :meth:`write` sends each workflow call to its :attr:`writer` when it runs one, else to its
    :attr:`committer`."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        writer_process: bool = False,
        log_format: LogFormat = "plain",
        deadline: float,
    ) -> None:
        self.ledger = ledger
        # Seconds a write waits for its commit before it is answered 503: the database
        # stopped answering (``[receiver] write_deadline``).
        self.deadline = deadline
        self.committer = GroupCommitter(ledger)
        self.writer_process = writer_process
        self.log_format = log_format  # the writer process's, as the receiver's
        self.writer: WriterProcess | None = None
        # Ends serving gracefully (set by :func:`flowledger.receiver.server.serve_app`).
        self.stop: Callable[[], None] | None = None
        # Why it could not start, in one line (the writer process could not open the ledger).
        self.refused: LedgerError | None = None

    async def start(self) -> None:
        self.committer.start()
        if self.writer_process:
            self.writer = WriterProcess(
                self.ledger,
                on_end=self._writer_ended,
                log_format=self.log_format,
                deadline=self.deadline,
            )
            try:
                await self.writer.start()
            except BaseException as exc:
                if isinstance(exc, LedgerError):
                    self.refused = exc
                self.committer.close()
                raise

    async def close(self) -> None:
        if self.writer is not None:
            await self.writer.close()
        self.committer.close()

    def write(self, call: CallRequest) -> Awaitable[Reply]:
        """``call`` written durably: its answer, error answers included."""
        if self.writer is not None:
            return self.writer.submit(call)
        return self._write_here(call)

    async def _write_here(self, call: CallRequest) -> Reply:
        try:
            unit = unit_of(self.ledger, call)
        except Exception as exc:  # the services refused the call before any transaction
            return Reply.error(as_api_error(exc))
        try:
            value = await self._within(
                self.committer.commit(call.actor, unit, call.guard, call.operation_id)
            )
        except Exception as exc:
            return reply_of(call, None, exc)
        return reply_of(call, value, None)

    async def commit(self, actor: str, work: Work[Any], guard: Guard | None = None) -> Any:
        """``work`` through the group commit (:meth:`GroupCommitter.commit`)."""
        return await self._within(self.committer.commit(actor, work, guard))

    async def _within(self, commit: Awaitable[Any]) -> Any:
        """``commit``'s value, or 503 once the deadline passed (the writer thread may still
        commit it: its outcome is unknown)."""
        try:
            return await asyncio.wait_for(commit, self.deadline)
        except TimeoutError:
            raise late_write(self.deadline) from None

    async def commit_keyed(
        self, actor: str, work: Work[Any], *, token_id: int, key: str, fingerprint: str, ttl: float
    ) -> bool:
        """``work`` through the group commit once per ``Idempotency-Key`` of token
        ``token_id``: True when a request with this key and fingerprint was done before, and
        nothing was done now (:func:`flowledger.receiver.engine.idempotency.keyed`: the key
        stored in the transaction of the work, refused if used for another request)."""
        unit = keyed(
            work,
            lambda _value: None,
            token_id=token_id,
            key=key,
            fingerprint=fingerprint,
            ttl=timedelta(seconds=ttl),
        )
        reply = await self._within(self.committer.commit(actor, unit))
        return reply.replayed

    def add_secrets(self, values: list[str]) -> None:
        """Secrets the writer process must redact from now on too (the ledger here is the
        caller's to tell)."""
        if self.writer is not None:
            self.writer.add_secrets(values)

    @property
    def ended(self) -> str | None:
        """Why the writer process ended while serving, once it has."""
        return self.writer.ended if self.writer is not None else None

    def _writer_ended(self) -> None:
        """Stop serving, through the server when it said how (``serve_app``). An app served
        otherwise (a test's client, another ASGI server) keeps serving, each workflow call
        answered 503, rather than signal a process that is not only the receiver."""
        if self.stop is not None:
            self.stop()
