"""Writing for many concurrent requests: group commit.

One writer thread takes every request waiting in its queue, runs them in one transaction, each
failing alone as if in a savepoint of its own (:meth:`Ledger.run_many`), commits once, and only
then answers each of them: a ``go`` is never sent before its commit is durable. While it waits
for the disk, the next batch gathers.

On SQLite, where there is one writer at a time and ``synchronous=FULL`` makes every commit an
fsync, one commit per request would cap throughput at the disk's fsync rate. On PostgreSQL
every transaction that appends events takes the hash chain's head row for its commit, so
one transaction per request queues them all on that row lock (bench/README.md, "Receiver
engine"). Several receiver processes
may share one PostgreSQL database: each has its own writer, and the compare-and-set in the
services keeps them correct.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from dataclasses import dataclass
from typing import Any

from flowledger.plumbing.metrics import COMMIT_BATCH_SIZE
from flowledger.services.ledger import Ledger
from flowledger.storage.unit_of_work import Guard, Work


@dataclass
class _Item:
    actor: str
    work: Work[Any]
    future: asyncio.Future[Any]
    guard: Guard | None = None
    reads: str | None = None


class GroupCommitter:
    """One writer thread; every request waiting when it is free shares the next commit."""

    def __init__(self, ledger: Ledger, *, max_batch: int = 256) -> None:
        self.ledger = ledger
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[list[_Item] | None] = queue.SimpleQueue()
        # Per event loop, the requests of its current turn (:meth:`commit`).
        self._turn: dict[asyncio.AbstractEventLoop, list[_Item]] = {}
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="flowledger-writer", daemon=True
            )
            self._thread.start()

    async def commit(
        self, actor: str, work: Work[Any], guard: Guard | None = None, reads: str | None = None
    ) -> Any:
        """Run ``work`` durably and return its value (or raise its error); ``guard`` runs
        ahead of it in the same transaction (a request's signature recorded once, see
        :meth:`Ledger.run_many`); ``reads`` names the operation it loads, which the batch may
        read ahead with its others'. The batch settles all of a loop's waiters in one
        callback, so n requests wake the loop once, not n times.

        The requests of one turn of the event loop are handed to the writer together, at the
        end of that turn (:meth:`_hand_over`), not each as it comes: a request handed over
        alone woke the writer thread, which then took the interpreter lock back and forth
        with the loop still serving the rest of the turn, and started its batch with only the
        first few (figures: bench/README.md, "Receiver engine")."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        item = _Item(actor, work, future, guard, reads)
        waiting = self._turn.get(loop)
        if waiting is None:
            self._turn[loop] = [item]
            loop.call_soon(self._hand_over, loop)
        else:
            waiting.append(item)
        return await future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """The requests of this turn of ``loop``, to the writer in one piece."""
        items = self._turn.pop(loop, None)
        if items:
            self._queue.put(items)

    def close(self) -> None:
        if self._thread is not None:
            for loop in list(self._turn):
                self._hand_over(loop)  # requests of a turn that had not ended: run them too
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        batch: list[_Item] = []  # handed over, not yet run (beyond a batch's limit)
        stop = False
        while True:
            if not batch:
                if stop:
                    return
                handed = self._queue.get()
                if handed is None:
                    return
                batch = handed
            while len(batch) < self.max_batch and not stop:
                try:
                    handed = self._queue.get_nowait()
                except queue.Empty:
                    break
                if handed is None:
                    stop = True
                else:
                    batch.extend(handed)
            self._run(batch[: self.max_batch])
            batch = batch[self.max_batch :]

    def _run(self, batch: list[_Item]) -> None:
        COMMIT_BATCH_SIZE.observe(len(batch))
        try:
            outcomes = self.ledger.run_many(
                [(i.actor, i.work) for i in batch],
                [i.guard for i in batch],
                [i.reads for i in batch],
            )
            settled = [(i.future, o.value, o.error) for i, o in zip(batch, outcomes, strict=True)]
        except BaseException as exc:  # the thread must go on serving the next batch
            settled = [(i.future, None, exc) for i in batch]
        by_loop: dict[asyncio.AbstractEventLoop, list[_Settled]] = {}
        for future, value, error in settled:
            by_loop.setdefault(future.get_loop(), []).append((future, value, error))
        for loop, ours in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, ours)


_Settled = tuple["asyncio.Future[Any]", Any, BaseException | None]


def _settle(settled: list[_Settled]) -> None:
    """In the loop: hand each waiting request its value or error (unless it was cancelled)."""
    for future, value, error in settled:
        if future.done():
            continue
        if isinstance(error, StopIteration):  # a future refuses it, and the batch would stall
            error = RuntimeError(f"a unit of work raised {error!r}")
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
