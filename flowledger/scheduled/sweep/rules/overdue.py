"""``overdue`` (non-blocking): an open hold past its deadline (overdue holds themselves
excepted), walked in (deadline, id) order; those already reported are skipped by their cause
key. It runs last, so that a hold opened by another rule is not reported overdue in the same
sweep."""

from __future__ import annotations

from typing import Any

from flowledger.domain import Reason, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage import due


@rule(Reason.OVERDUE, order=1000)
def overdue(sweep: Batches) -> int:
    # The walk moves on only once a batch is committed: a retried batch reads its rows again.
    cursor: list[Any] = []
    proposed: list[Any] = []

    def advance() -> None:
        cursor[:] = proposed

    def step(tx: Tx) -> tuple[int, bool]:
        rows = due.overdue_holds(tx.conn, tx.now, cursor, sweep.batch)
        targets = [
            HoldTarget(
                staleness.overdue_hold(r.id, r.reason, r.deadline),
                r.operation_id,
                execution_id=r.execution_id,
                source=r.source,
                refers_to=r.id,
            )
            for r in rows
        ]
        # The holds it reports are locked, and a writer closing one closes the overdue
        # holds about it after the wait (records.open_overdue_about): an overdue hold,
        # which blocks no write, needs no lock of its operation, and taking one while
        # holding the hold's deadlocked a confirm that holds the operation and waits
        # to close the hold.
        opened = sweep.open(tx, targets, locked=True)
        proposed[:] = [rows[-1].deadline, rows[-1].id] if rows else cursor
        # Rows already reported open nothing; keep walking while a full batch came back.
        return opened, len(rows) == sweep.batch

    return sweep.drain(step, advance)
