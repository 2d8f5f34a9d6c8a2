"""``execution_failed`` (blocking): an operation still ``dispatching`` whose linked execution
errored, crashed, or vanished from the tool unfinished.

The ids of the due operations are read first, without a lock and :data:`CANDIDATES` at most at a
time, then a batch of them at a time again, locked, under the same conditions (a confirm may
have settled one meanwhile): walking the dispatching operations and joining each batch to its
executions read every in-flight operation in its last batch to find there were no more (the
figures are in ``bench/README.md``, section "Sweep")."""

from __future__ import annotations

from functools import partial

from flowledger.domain import NewHold, Reason, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage import due
from flowledger.storage.paging import Listed

# The most ids of due operations read at once.
CANDIDATES = 50_000


@rule(Reason.EXECUTION_FAILED, order=30)
def execution_failed(sweep: Batches) -> int:
    walk = due.failed_walk()
    opened = 0
    while True:
        with sweep.ledger.store.reader.connect() as conn:
            ids = due.failed_candidates(conn, walk, CANDIDATES)
        walk.advance()
        if ids:
            opened += sweep.walk(partial(_batch, sweep), Listed(ids, sweep.batch))
        if not walk.full:
            return opened


def _batch(sweep: Batches, listed: Listed, tx: Tx) -> tuple[int, bool]:
    targets = []
    for r in due.failed_rows(tx.conn, listed):
        status = r.execution_status
        if status not in staleness.FAILED_EXECUTION_STATUSES:
            status = f"{status} and vanished from the tool"
        detail = staleness.execution_failed_detail(status, r.execution_id)
        targets.append(
            HoldTarget(
                NewHold.of(Reason.EXECUTION_FAILED, r.cause_key, detail),
                r.operation_id,
                execution_id=r.execution_id,
                source=r.source,
            )
        )
    return sweep.open(tx, targets, locked=True), listed.full
