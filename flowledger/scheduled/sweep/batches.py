"""How a rule's batches run: each in its own write transaction, walked, overlapped on PostgreSQL.

A rule reads a bounded batch of due rows and opens their holds in the same transaction
(:meth:`Batches.open`), so each opening is an event (and an alert when alerting is configured).
Each batch starts where the last one ended (a :class:`~flowledger.storage.paging.Walk` or a
:class:`~flowledger.storage.paging.Listed`). On SQLite a batch starts once the one before has
committed; on PostgreSQL, for the rules that lock their rows, as soon as the one before has
read and locked them, so that one batch's holds are built while the server writes the other's
(:meth:`Batches.overlapped`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from typing import TypeVar

from flowledger.config import SourceConfig, SweepConfig
from flowledger.services.ledger import HoldTarget, Ledger, Tx
from flowledger.storage.paging import Pages

# One rule reads at most this many rows per transaction.
BATCH = 500
# On PostgreSQL, how many batches of one rule may be in flight at once (see Batches.overlapped).
IN_FLIGHT = 2

# A batch of work: given the transaction, return (holds opened, whether to read another batch).
Step = Callable[[Tx], tuple[int, bool]]
P = TypeVar("P", bound=Pages)


def _told(event: threading.Event, _: object) -> None:
    event.set()


class Batches:
    """What every rule runs its batches through, over one ledger. ``sources`` are the
    configured sources (their intervals say when each is stale); ``actor`` names who opened
    the holds in the event log; ``batch`` is the most rows a batch reads."""

    def __init__(
        self,
        ledger: Ledger,
        cfg: SweepConfig,
        sources: Sequence[SourceConfig] = (),
        *,
        batch: int = BATCH,
        actor: str = "sweep",
    ) -> None:
        self.ledger = ledger
        self.cfg = cfg
        self.sources = list(sources)
        self.batch = batch
        self.actor = actor

    def walk(
        self, rule: Callable[[P, Tx], tuple[int, bool]], walk: P, *, locks: bool = True
    ) -> int:
        """Run ``rule`` over ``walk``'s batches until one says there is no more; the holds
        opened. ``locks``: the rule locks the rows it reads."""
        # Only a rule that locks the rows it reads overlaps its batches: a batch read again
        # after a lost race skips the rows the next one holds instead of reading into them.
        if locks and self.ledger.store.dialect == "postgresql":
            return self.overlapped(rule, walk)
        return self.drain(partial(rule, walk), walk.advance)

    def overlapped(self, rule: Callable[[P, Tx], tuple[int, bool]], walk: P) -> int:
        """PostgreSQL: each batch in its own transaction, the next one starting as soon as
        this one has read and locked its rows, so that one batch's holds are built while the
        server writes the one before; :data:`IN_FLIGHT` at most. Their rows do not overlap:
        the next batch starts after this one's last row, and each skips rows another has
        locked. A batch that lost a race reads again from its own start, past the rows the
        next one holds (a row that became due inside its range meanwhile waits for the next
        sweep). What it gains is in ``bench/README.md``, section "Sweep"."""
        opened = 0
        inflight: deque[Future[tuple[int, bool]]] = deque()
        with ThreadPoolExecutor(max_workers=IN_FLIGHT, thread_name_prefix="sweep") as pool:
            try:
                while True:
                    read = threading.Event()
                    walk.on_page = read.set
                    batch = pool.submit(self.ledger.run, self.actor, partial(rule, walk))
                    batch.add_done_callback(partial(_told, read))
                    inflight.append(batch)
                    read.wait()
                    if len(inflight) >= IN_FLIGHT:
                        opened += inflight.popleft().result()[0]
                    if not walk.full or (batch.done() and batch.exception() is not None):
                        break
                    walk = walk.following()
            except BaseException:
                wait(inflight)  # the others end first; the error raised is this one
                raise
            while inflight:
                opened += inflight.popleft().result()[0]
        return opened

    def drain(self, step: Step, committed: Callable[[], None] | None = None) -> int:
        """Run ``step`` until it says there is no more; ``committed`` is told after each
        batch's commit (a step that lost a race runs again from where it stood)."""
        opened = 0
        while True:
            new, more = self.ledger.run(self.actor, step)
            if committed is not None:
                committed()
            opened += new
            if not more:
                return opened

    def open(self, tx: Tx, targets: list[HoldTarget], *, locked: bool = False) -> int:
        """Open the holds of ``targets`` that have none yet; how many were opened.
        ``locked``: the rule read their operations with a lock, or its holds need none
        (``overdue``)."""
        return sum(1 for i in self.ledger.open_holds(tx, targets, locked=locked) if i)
