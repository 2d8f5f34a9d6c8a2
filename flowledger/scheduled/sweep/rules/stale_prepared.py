"""``stale_prepared`` (non-blocking): an operation prepared longer than ``[sweep]
stale_prepared_after`` and never dispatched."""

from __future__ import annotations

from functools import partial

from flowledger.domain import NewHold, Reason, State, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage.due import OperationsDue
from flowledger.storage.paging import Walk

DUE = OperationsDue(
    Reason.STALE_PREPARED,
    State.PREPARED,
    "updated_at",
    columns=("operation_id", "updated_at", "source"),
)


@rule(Reason.STALE_PREPARED, order=40)
def stale_prepared(sweep: Batches) -> int:
    return sweep.walk(partial(_batch, sweep), DUE.walk())


def _batch(sweep: Batches, walk: Walk, tx: Tx) -> tuple[int, bool]:
    due = staleness.cutoff(tx.now, sweep.cfg.stale_prepared_after)
    rows = DUE.read(tx.conn, walk, due, sweep.batch)
    targets = [
        HoldTarget(
            NewHold.of(
                Reason.STALE_PREPARED, r.cause_key, staleness.stale_prepared_detail(r.updated_at)
            ),
            r.operation_id,
            source=r.source,
        )
        for r in rows
    ]
    return sweep.open(tx, targets, locked=True), walk.full
