"""The writer process itself: it opens the ledger the receiver names, then takes every call
handed over so far, runs them in one transaction (:meth:`Ledger.run_many`), commits once and
sends back each call's finished answer; again, until its socket ends
(:mod:`flowledger.receiver.engine.writer_process` is the receiver's end). It imports no web
framework: a call arrives validated, as data (:class:`~flowledger.receiver.api.calls.CallRequest`),
and its answer leaves as bytes (:class:`~flowledger.receiver.api.reply.Reply`)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import logging.config
import os
import signal
import socket
import sys
import time
from typing import Any

from flowledger.receiver.api.calls import CallRequest
from flowledger.receiver.api.errors import as_api_error
from flowledger.receiver.api.reply import Reply
from flowledger.receiver.engine.tuning import quiet_collector
from flowledger.receiver.engine.units import reply_of, unit_of, without_value
from flowledger.receiver.engine.wire import READ_SIZE, Frames, pack
from flowledger.receiver.logs import ledger_log_config
from flowledger.services.ledger import Ledger
from flowledger.storage.deadline import Deadline
from flowledger.storage.engine import check_schema, make_store
from flowledger.storage.unit_of_work import Guard, Work


def _die_with(parent: int) -> None:
    """SIGKILL when the receiver dies, however it dies (Linux); elsewhere the end of the
    socket ends the child after its batch."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the request was made
        os._exit(0)


def run_batch(
    ledger: Ledger, batch: list[tuple[int, CallRequest]]
) -> tuple[list[tuple[int, Reply]], int]:
    """Every call of ``batch`` in one transaction: each call's answer, and how many units
    shared the commit (the calls the services refused before it are not among them)."""
    replies: list[tuple[int, Reply]] = []
    units: list[tuple[str, Work[Any]]] = []
    guards: list[Guard | None] = []
    reads: list[str | None] = []
    ran: list[tuple[int, CallRequest]] = []
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
            reply = reply_of(call, value, error)
        except Exception as exc:  # one answer that cannot be made fails alone, as in process
            reply = Reply.error(as_api_error(exc))
        replies.append((seq, reply))
    return replies, len(units)


def serve_child(
    sock: socket.socket,
    frames: Frames,
    ledger: Ledger,
    max_batch: int,
    early: list[Any],
    deadline: Deadline | None = None,
) -> None:
    """Take every call handed over so far, run up to ``max_batch`` of them in one commit,
    answer them, and again; until the socket ends and nothing is left. ``frames`` holds what
    was read after the first message, ``early`` the messages that came with it. A batch runs
    within ``deadline`` when there is one (PostgreSQL): a server that stopped answering fails
    the batch, its connections cut, rather than wedge the writer until it answers again."""
    bound = deadline.bound if deadline is not None else contextlib.nullcontext
    waiting: list[tuple[int, CallRequest, float]] = []  # and each call's deadline
    ended = False
    counted = ledger.unit.round_trips
    short = ledger.unit.checkpoints_short

    def handle(messages: list[Any]) -> None:
        for kind, payload, *until in messages:
            if kind == "write":
                waiting.extend((seq, call, until[0]) for seq, call in payload)
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
            take(sock.recv(READ_SIZE))  # wait for the next calls
        while not ended:  # and every other already sent: they share this commit
            try:
                take(sock.recv(READ_SIZE, socket.MSG_DONTWAIT))
            except BlockingIOError:
                break
        if not waiting:
            continue
        taken, waiting[:] = waiting[:max_batch], waiting[max_batch:]
        # A call past its deadline was answered 503 by the receiver: not begun now, it is not
        # written at all (a writer that was stuck does not write a backlog nobody waits for).
        began = time.monotonic()
        batch = [(seq, call) for seq, call, until in taken if until > began]
        if not batch:
            continue
        with bound():
            replies, units = run_batch(ledger, batch)
        now = ledger.unit.round_trips  # summed as it goes: the registry's walk cost more
        left_short = ledger.unit.checkpoints_short - short
        try:
            frame = pack(("done", replies, units, now - counted, left_short))
        except Exception:  # a value that cannot be pickled: the answers without their values
            bare = [(seq, without_value(r)) for seq, r in replies]
            frame = pack(("done", bare, units, now - counted, left_short))
        with contextlib.suppress(OSError):  # the receiver went away: nobody to answer
            sock.sendall(frame)
        counted, short = now, ledger.unit.checkpoints_short


def _child(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    frames = Frames()
    messages: list[Any] = []
    while not messages:
        data = sock.recv(READ_SIZE)
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
    logging.config.dictConfig(ledger_log_config(secrets=known, log_format=args.pop("log_format")))
    max_batch = args.pop("max_batch")
    seconds = args.pop("write_deadline")
    targets = args.pop("alert_targets")
    try:
        store = make_store(args.pop("url"))
        # Before its first connection: the deadline cuts the connections it saw opened.
        deadline = Deadline(store.engine, seconds) if store.dialect == "postgresql" else None
        check_schema(store)  # a newer flowledger may have migrated it since the receiver looked
    except Exception as exc:
        sock.sendall(pack(("failed", f"the writer process cannot open the ledger: {exc}")))
        return 1
    ledger = Ledger(store, **args)
    ledger.alert_targets = targets
    quiet_collector()  # as the receiver before it serves (bench/README.md, "Receiver engine")
    sock.sendall(pack(("ready",)))
    try:
        serve_child(sock, frames, ledger, max_batch, messages, deadline)
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
