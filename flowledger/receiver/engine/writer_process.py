"""The workflow calls' group commit in a process of its own: ``serve`` and ``run`` on two cores.

The receiver is one interpreter, and its interpreter lock is what bounds it: with the writer a
thread beside the event loop, the two took turns on one core while the other core idled.
Here the event loop keeps everything up to a validated body (HTTP, tokens, signatures,
pydantic) and hands each workflow call, as data, to a child process that builds the call's unit
of work from it, runs every call waiting in one transaction (:meth:`Ledger.run_many`), commits
once and sends back each call's finished answer (status, headers, exact body). A ``go`` is
never sent before its commit is durable, as with the thread.

What crosses the socket between the two (:mod:`~flowledger.receiver.engine.wire`) is a
:class:`~flowledger.receiver.api.calls.CallRequest` (the call's name, the operation id, the
validated body, the actor, the ``Idempotency-Key`` and the signature guard) one way, and a
:class:`~flowledger.receiver.api.reply.Reply` the other, in length-prefixed pickles: both
ends are this program. One frame carries a whole turn of the event loop, and one answer frame a
whole batch. This module is the receiver's end; the child's is
:mod:`~flowledger.receiver.engine.writer_child`.

A call the child has not answered within the write deadline is answered 503 ``unavailable``
here, as the database did not answer in time; the child leaves out a call whose deadline had
passed before it began it, and on PostgreSQL cuts its connections when a batch overruns the
same deadline (:mod:`flowledger.storage.deadline`), so that it is not left waiting on a server
that stopped answering.

If the child ends (killed, out of memory), every call it had not answered is answered 503
``unavailable``: its commit may or may not have happened, as after a failed commit, and the
workflow's retry finds out. The receiver then stops serving and ``serve`` exits non-zero, for
its supervisor to start again, rather than carry on with a second writer it did not expect.
The child asks Linux to kill it when the receiver dies, and otherwise ends at the end of its
socket.

Other writes of the receiver (the tokens' last use, a signed read's signature) keep the writer
thread: they are rare, and SQLite's write lock serialises the two writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowledger.config import LogFormat
from flowledger.plumbing.clock import utcnow
from flowledger.plumbing.metrics import COMMIT_BATCH_SIZE, DB_ROUND_TRIPS, WAL_CHECKPOINTS_SHORT
from flowledger.receiver.api.calls import CallRequest
from flowledger.receiver.api.errors import as_api_error, late_write, unavailable
from flowledger.receiver.api.reply import Reply
from flowledger.receiver.engine.wire import Frames, pack
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import LedgerError

log = logging.getLogger("flowledger.writer")
STARTUP_TIMEOUT = 60.0  # seconds for the child to import and open the ledger
# The child's command: :mod:`~flowledger.receiver.engine.writer_child` imported by its name (not
# run as ``__main__``, which would be a second copy of it beside the one the package imports),
# then its ``main``. ``-P`` keeps
# the working directory off ``sys.path`` (``-c`` puts it first, so a ``pickle.py`` there would
# run in the child); the directory this package was imported from goes first instead.
_ROOT = str(Path(__file__).resolve().parents[3])
_ENTRY = (
    f"import sys; sys.path.insert(0, {_ROOT!r}); "
    "from flowledger.receiver.engine.writer_child import main; main()"
)


class WriterEnded(LedgerError):
    """The writer process ended while the receiver was serving."""


def _ledger_args(ledger: Ledger) -> dict[str, Any]:
    """What the child needs to build the same services over the same database."""
    if ledger.clock is not utcnow:
        raise ValueError("a writer process keeps the wall clock; a ledger with its own clock")
    return {
        "url": ledger.store.url,
        "secret": ledger.secret,
        "max_attempts": ledger.max_attempts,
        "dispatch_deadline": ledger.dispatch_deadline,
        "hold_deadlines": ledger.hold_deadlines,
        "twin_window": ledger.twin_window,
        "retries": ledger.retries,
        "alert_targets": ledger.alert_targets,
        "pin_sources": ledger.pin_sources,
        "secrets": ledger.secrets,
    }


class WriterProcess:
    """The receiver's end: hands calls to the child and gives each its answer."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        on_end: Callable[[], None],
        max_batch: int = 256,
        log_format: LogFormat = "plain",
        deadline: float,
    ) -> None:
        self.ledger = ledger
        self.deadline = deadline  # seconds a call waits for its answer (then 503)
        self.on_end = on_end  # told when the child ended while serving: stop serving
        self.max_batch = max_batch
        self.log_format = log_format
        self.ended: str | None = None  # why the child ended while serving, once it has
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._turn: list[tuple[int, CallRequest]] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._closing = False
        self._started = False  # the child said it is ready
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        args = {
            **_ledger_args(self.ledger),
            "max_batch": self.max_batch,
            "write_deadline": self.deadline,
            "log_format": self.log_format,
            "parent": os.getpid(),
        }
        loop = self._loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _ENTRY, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._ready = ready = loop.create_future()
        try:
            self._transport, _ = await loop.create_unix_connection(lambda: _Link(self), sock=ours)
            self._transport.write(pack(args))
            await asyncio.wait_for(asyncio.shield(ready), STARTUP_TIMEOUT)
        except BaseException:
            self._closing = True
            if ready.done() and not ready.cancelled():
                ready.exception()  # raised here or superseded: not to be logged as unread
            else:
                ready.cancel()
            if self._transport is not None:
                self._transport.close()
            else:
                ours.close()
            self._kill()
            raise

    def submit(self, call: CallRequest) -> asyncio.Future[Reply]:
        """The future of ``call``'s answer once the child has written it durably (error
        answers included). Called from the event loop's thread."""
        if self._transport is None or self._closing:  # not started, ended or stopping
            future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            future.set_result(
                Reply.error(unavailable("the ledger's writer is not running; retry later"))
            )
            return future
        # Running: on the loop its transport was made on (:meth:`start`), without
        # asyncio.get_running_loop(), which asks the system for the process id on every
        # call (Python 3.11): a system call a request.
        loop = self._loop
        assert loop is not None
        future = loop.create_future()
        seq = next(self._seq)
        self._pending[seq] = future
        if self._turn is None:
            self._turn = []
            loop.call_soon(self._hand_over)
        self._turn.append((seq, call))
        return future

    def _hand_over(self) -> None:
        """The calls of this turn of the loop, to the child in one frame. A call that cannot
        be pickled is answered here (503, logged by its error's class) rather than left
        waiting, with the rest of its turn."""
        turn, self._turn = self._turn, None
        if not turn:
            return
        loop = self._loop
        assert loop is not None
        # The turn's deadline, on the clock both processes share (the loop's is monotonic).
        until = loop.time() + self.deadline
        try:
            frame = pack(("write", turn, until))
        except Exception:
            kept = []
            for seq, call in turn:
                try:
                    pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    self._answer(seq, Reply.error(as_api_error(exc)))
                else:
                    kept.append((seq, call))
            frame = pack(("write", kept, until))
        self._send(frame)
        # One timer a turn, not one a call: a turn's calls were handed over together.
        loop.call_at(until, self._expire, [seq for seq, _ in turn])

    def _expire(self, turn: list[int]) -> None:
        """What the child has not answered of ``turn`` by the deadline is answered 503: the
        database did not answer in time. A call the child had begun may still be written (the
        call's retry, with its ``Idempotency-Key``, gets the answer it was written with); one
        it had not begun by then it leaves out."""
        late = [seq for seq in turn if seq in self._pending]
        if late:
            reply = Reply.error(late_write(self.deadline))
            for seq in late:
                self._answer(seq, reply)

    def _answer(self, seq: int, reply: Reply) -> None:
        future = self._pending.pop(seq, None)
        if future is not None and not future.done():
            future.set_result(reply)

    def add_secrets(self, values: list[str]) -> None:
        """Secrets the child must redact from now on too (a new signing token's). Called from
        the token cache's reload, in a worker thread: sent from the loop, ahead of the calls
        that the reload let in."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._send, pack(("secrets", values)))

    def _send(self, frame: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(frame)

    def received(self, message: Any) -> None:
        kind = message[0]
        if kind == "done":
            _, replies, batch, round_trips, checkpoints_short = message
            if batch:  # the units that shared a commit (calls refused before it are not)
                COMMIT_BATCH_SIZE.observe(batch)
            if round_trips:
                DB_ROUND_TRIPS.inc(round_trips)
            if checkpoints_short:
                WAL_CHECKPOINTS_SHORT.inc(checkpoints_short)
            for seq, reply in replies:
                self._answer(seq, reply)
        elif kind == "ready" and self._ready is not None and not self._ready.done():
            # Started from here on, not once start() resumes: a child that ends in between
            # is then an ending like any other (see lost()).
            self._started = True
            self._ready.set_result(None)
        elif kind == "failed" and self._ready is not None and not self._ready.done():
            self._ready.set_exception(LedgerError(message[1]))

    def lost(self) -> None:
        """The child's end closed: it ended, or is ending after :meth:`close`. Whatever it had
        not answered gets a 503: its commit may or may not have happened."""
        self._transport = None
        answer = Reply.error(unavailable("the ledger's writer ended; retry later"))
        for future in self._pending.values():
            if not future.done():
                future.set_result(answer)
        self._pending.clear()
        if not self._started:  # start() raises instead
            if self._ready is not None and not self._ready.done():
                self._ready.set_exception(LedgerError("the writer process ended while starting"))
            return
        if self._closing:
            if self._proc is not None and (self._proc.poll() or 0) < 0:
                log.warning("the writer process was killed while the receiver stopped")
            return
        status = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = self._proc.wait(1)  # its socket closes as it ends
        self.ended = _ending(status)
        log.error("the writer process ended (%s); the receiver stops", self.ended)
        self.on_end()

    async def close(self) -> None:
        """Let the child answer what it was handed, then end it."""
        self._closing = True
        self._hand_over()
        if self._transport is not None:
            self._transport.write_eof()  # the child ends at the end of its socket
        proc = self._proc
        if proc is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, proc.wait, 30)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._transport is not None:
            self._transport.close()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _ending(status: int | None) -> str:
    if status is None:
        return "its socket closed"
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return f"exit status {status}"


class _Link(asyncio.Protocol):
    def __init__(self, writer: WriterProcess) -> None:
        self.writer = writer
        self.frames = Frames()

    def data_received(self, data: bytes) -> None:
        for message in self.frames.feed(data):
            self.writer.received(message)

    def eof_received(self) -> bool:
        return False  # close the transport too

    def connection_lost(self, exc: Exception | None) -> None:
        self.writer.lost()
