"""``execution_stuck`` (non-blocking): an execution ``running`` longer than ``[sweep]
execution_stuck_after``; the hold names the execution, not an operation."""

from __future__ import annotations

from functools import partial

from flowledger.domain import Reason, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage import due
from flowledger.storage.paging import Walk


@rule(Reason.EXECUTION_STUCK, order=50)
def execution_stuck(sweep: Batches) -> int:
    # Its rows are not locked: its hold blocks no write, and only the sync changes them.
    return sweep.walk(partial(_batch, sweep), due.stuck_walk(), locks=False)


def _batch(sweep: Batches, walk: Walk, tx: Tx) -> tuple[int, bool]:
    started_by = staleness.cutoff(tx.now, sweep.cfg.execution_stuck_after)
    rows = due.stuck_executions(tx.conn, walk, started_by, sweep.batch)
    targets = [
        HoldTarget(
            staleness.execution_stuck_hold(r.source, r.external_id, r.started_at),
            execution_id=r.external_id,
            source=r.source,
        )
        for r in rows
    ]
    return sweep.open(tx, targets), walk.full
