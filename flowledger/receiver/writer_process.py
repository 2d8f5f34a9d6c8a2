"""The write lane's group commit in a process of its own: ``serve`` and ``run`` on two cores.

The receiver is one interpreter, and its interpreter lock is what bounds it: with the writer a
thread beside the event loop, the two took turns on one core while the other core idled.
Here the event loop keeps everything up to a validated body (HTTP, tokens, signatures,
pydantic) and hands each workflow call, as data, to a child process that builds the call's unit
of work from it, runs every call waiting in one transaction (:meth:`Ledger.run_many`), commits
once and sends back each call's finished answer (status, headers, exact body). A ``go`` is
never sent before its commit is durable, as with the thread.

What crosses the socket between the two is a :class:`LaneCall` (the call's name, the operation
id, the validated body, the actor, the ``Idempotency-Key`` and the signature guard) one way,
and a :class:`~flowledger.receiver.reply.Reply` the other, in length-prefixed pickles: both ends are
this program. One frame carries a whole turn of the event loop, and one answer frame a whole
batch.

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
import ctypes
import itertools
import logging
import logging.config
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowledger.clock import utcnow
from flowledger.metrics import COMMIT_BATCH_SIZE, DB_ROUND_TRIPS, REGISTRY
from flowledger.receiver.auth import Once
from flowledger.receiver.calls import BY_NAME
from flowledger.receiver.errors import as_api_error, unavailable
from flowledger.receiver.idempotency import keyed, settled
from flowledger.receiver.logs import log_config
from flowledger.receiver.reply import Reply
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import LedgerError, make_store
from flowledger.storage.unit_of_work import Guard, Work

log = logging.getLogger("flowledger.writer")
_LENGTH = struct.Struct("!I")
_READ = 1 << 20
STARTUP_TIMEOUT = 60.0  # seconds for the child to import and open the ledger
_ROUND_TRIPS = "flowledger_db_round_trips_total"
# The child's command: this module imported by its name (not run as ``__main__``, which would
# be a second copy of it beside the one the package imports), then :func:`main`. ``-P`` keeps
# the working directory off ``sys.path`` (``-c`` puts it first, so a ``pickle.py`` there would
# run in the child); the directory this package was imported from goes first instead.
_ROOT = str(Path(__file__).resolve().parents[2])
_ENTRY = (
    f"import sys; sys.path.insert(0, {_ROOT!r}); "
    "from flowledger.receiver.writer_process import main; main()"
)


class WriterEnded(LedgerError):
    """The writer process ended while the receiver was serving."""


@dataclass(frozen=True)
class LaneCall:
    """One workflow call as the writer process needs it to build and run its unit."""

    call: str  # a name in :data:`~flowledger.receiver.calls.CALLS`
    operation_id: str | None
    body: BaseModel
    actor: str
    token_id: int
    key: str | None  # the Idempotency-Key, checked
    fingerprint: str  # the request's hash, for a key
    ttl: float  # seconds an Idempotency-Key's answer is kept
    guard: Once | None  # the signature, recorded once
    observe: bool  # the answer's value is wanted back (the call has an ``observe``)


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class _Frames:
    """Length-prefixed frames out of a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        """The messages ``data`` completes, in order; the rest waits for more."""
        buffer = self._buffer
        buffer += data
        start = 0
        messages = []
        while len(buffer) - start >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer, start)
            end = start + _LENGTH.size + length
            if len(buffer) < end:
                break
            messages.append(pickle.loads(memoryview(buffer)[start + _LENGTH.size : end]))
            start = end
        del buffer[:start]
        return messages


# ------------------------------------------------------------------------------ the receiver


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
        "retries": ledger.retries,
        "alert_targets": ledger.alert_targets,
        "secrets": ledger.secrets,
    }


class WriterProcess:
    """The receiver's end: hands calls to the child and gives each its answer."""

    def __init__(self, ledger: Ledger, *, on_end: Callable[[], None], max_batch: int = 256) -> None:
        self.ledger = ledger
        self.on_end = on_end  # told when the child ended while serving: stop serving
        self.max_batch = max_batch
        self.ended: str | None = None  # why the child ended while serving, once it has
        self._proc: subprocess.Popen[bytes] | None = None
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[Reply]] = {}
        self._turn: list[tuple[int, LaneCall]] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._closing = False
        self._started = False  # the child said it is ready
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        args = {**_ledger_args(self.ledger), "max_batch": self.max_batch, "parent": os.getpid()}
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
            self._transport.write(_frame(args))
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

    async def write(self, call: LaneCall) -> Reply:
        """``call`` run durably by the child: its answer, error answers included."""
        if self._transport is None or self._closing:  # not started, ended or stopping
            return Reply.error(unavailable("the ledger's writer is not running; retry later"))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        seq = next(self._seq)
        self._pending[seq] = future
        if self._turn is None:
            self._turn = []
            loop.call_soon(self._hand_over)
        self._turn.append((seq, call))
        return await future

    def _hand_over(self) -> None:
        """The calls of this turn of the loop, to the child in one frame. A call that cannot
        be pickled is answered here (503, logged by its error's class) rather than left
        waiting, with the rest of its turn."""
        turn, self._turn = self._turn, None
        if not turn:
            return
        try:
            frame = _frame(("write", turn))
        except Exception:
            kept = []
            for seq, call in turn:
                try:
                    pickle.dumps(call, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as exc:
                    self._answer(seq, Reply.error(as_api_error(exc)))
                else:
                    kept.append((seq, call))
            frame = _frame(("write", kept))
        self._send(frame)

    def _answer(self, seq: int, reply: Reply) -> None:
        future = self._pending.pop(seq, None)
        if future is not None and not future.done():
            future.set_result(reply)

    def add_secrets(self, values: list[str]) -> None:
        """Secrets the child must redact from now on too (a new signing token's). Called from
        the token cache's reload, in a worker thread: sent from the loop, ahead of the calls
        that the reload let in."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._send, _frame(("secrets", values)))

    def _send(self, frame: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(frame)

    def received(self, message: Any) -> None:
        kind = message[0]
        if kind == "done":
            _, replies, batch, round_trips = message
            if batch:  # the units that shared a commit (calls refused before it are not)
                COMMIT_BATCH_SIZE.observe(batch)
            if round_trips:
                DB_ROUND_TRIPS.inc(round_trips)
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
        self.frames = _Frames()

    def data_received(self, data: bytes) -> None:
        for message in self.frames.feed(data):
            self.writer.received(message)

    def eof_received(self) -> bool:
        return False  # close the transport too

    def connection_lost(self, exc: Exception | None) -> None:
        self.writer.lost()


# ------------------------------------------------------------------------------ the child


def _die_with(parent: int) -> None:
    """SIGKILL when the receiver dies, however it dies (Linux); elsewhere the end of the
    socket ends the child after its batch."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the request was made
        os._exit(0)


def unit_of(ledger: Ledger, call: LaneCall) -> Work[Any]:
    """The unit of work ``call`` stands for, as the write lane builds it in process."""
    work = BY_NAME[call.call].work(ledger, call.operation_id, call.body)
    if call.key is None:
        return work
    return keyed(
        work,
        token_id=call.token_id,
        key=call.key,
        fingerprint=call.fingerprint,
        ttl=timedelta(seconds=call.ttl),
    )


def run_batch(
    ledger: Ledger, batch: list[tuple[int, LaneCall]]
) -> tuple[list[tuple[int, Reply]], int]:
    """Every call of ``batch`` in one transaction: each call's answer, and how many units
    shared the commit (the calls the services refused before it are not among them)."""
    replies: list[tuple[int, Reply]] = []
    units: list[tuple[str, Work[Any]]] = []
    guards: list[Guard | None] = []
    reads: list[str | None] = []
    ran: list[tuple[int, LaneCall]] = []
    for seq, call in batch:
        try:
            units.append((call.actor, unit_of(ledger, call)))
        except Exception as exc:  # the services refused the call before any transaction
            replies.append((seq, Reply.error(as_api_error(exc))))
            continue
        guards.append(call.guard)
        reads.append(call.operation_id)
        ran.append((seq, call))
    if not units:
        return replies, 0
    try:
        outcomes = ledger.run_many(units, guards, reads)
        results: list[tuple[Any, BaseException | None]] = [(o.value, o.error) for o in outcomes]
    except Exception as exc:
        results = [(None, exc)] * len(units)
    for (seq, call), (value, error) in zip(ran, results, strict=True):
        try:
            reply = _reply(call, value, error)
        except Exception as exc:  # one answer that cannot be made fails alone, as in process
            reply = Reply.error(as_api_error(exc))
        replies.append((seq, reply))
    return replies, len(units)


def _reply(call: LaneCall, value: Any, error: BaseException | None) -> Reply:
    if error is not None:
        return Reply.error(as_api_error(error))
    reply = settled(value)
    # Nobody reads the value: not sent back.
    return reply if call.observe or reply.value is None else _without_value(reply)


def _without_value(reply: Reply) -> Reply:
    # A new Reply: dataclasses.replace took 2 % of the writer process's samples.
    return Reply(reply.status, reply.body, None, reply.replayed, reply.headers)


def _round_trips() -> float:
    return REGISTRY.get_sample_value(_ROUND_TRIPS) or 0.0


def serve_child(
    sock: socket.socket, frames: _Frames, ledger: Ledger, max_batch: int, early: list[Any]
) -> None:
    """Take every call handed over so far, run up to ``max_batch`` of them in one commit,
    answer them, and again; until the socket ends and nothing is left. ``frames`` holds what
    was read after the first message, ``early`` the messages that came with it."""
    waiting: list[tuple[int, LaneCall]] = []
    ended = False
    counted = _round_trips()

    def handle(messages: list[Any]) -> None:
        for kind, payload in messages:
            if kind == "write":
                waiting.extend(payload)
            elif kind == "secrets":
                ledger.add_secrets(payload)

    def take(data: bytes) -> None:
        nonlocal ended
        if not data:
            ended = True
        handle(frames.feed(data))

    handle(early)

    while True:
        if not waiting:
            if ended:
                return
            take(sock.recv(_READ))  # wait for the next calls
        while not ended:  # and every other already sent: they share this commit
            try:
                take(sock.recv(_READ, socket.MSG_DONTWAIT))
            except BlockingIOError:
                break
        if not waiting:
            continue
        batch, waiting[:] = waiting[:max_batch], waiting[max_batch:]
        replies, units = run_batch(ledger, batch)
        now = _round_trips()
        try:
            frame = _frame(("done", replies, units, now - counted))
        except Exception:  # a value that cannot be pickled: the answers without their values
            bare = [(seq, _without_value(r)) for seq, r in replies]
            frame = _frame(("done", bare, units, now - counted))
        with contextlib.suppress(OSError):  # the receiver went away: nobody to answer
            sock.sendall(frame)
        counted = now


def _child(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    frames = _Frames()
    messages: list[Any] = []
    while not messages:
        data = sock.recv(_READ)
        if not data:
            return 0
        messages = frames.feed(data)
    args: dict[str, Any] = messages.pop(0)
    _die_with(args.pop("parent"))
    secrets = args["secrets"]
    ledger: Ledger | None = None

    def known() -> Any:
        return ledger.secrets if ledger is not None else secrets

    # First, and for every logger (the writer's own log through the root logger): redacted.
    config = log_config(secrets=known)
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    logging.config.dictConfig(config)
    max_batch = args.pop("max_batch")
    targets = args.pop("alert_targets")
    try:
        store = make_store(args.pop("url"))
    except Exception as exc:
        sock.sendall(_frame(("failed", f"the writer process cannot open the ledger: {exc}")))
        return 1
    ledger = Ledger(store, **args)
    ledger.alert_targets = targets
    sock.sendall(_frame(("ready",)))
    try:
        serve_child(sock, frames, ledger, max_batch, messages)
    finally:
        store.dispose()
    return 0


def main() -> None:
    # The receiver decides when the child ends (the end of its socket), not a signal to the
    # whole process group: Ctrl+C in a terminal, or a service manager's SIGTERM, stop the
    # receiver, which lets the child finish its batch and close. SIGKILL still kills it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(_child(int(sys.argv[1])))
