"""``unknown_outcome`` (blocking): an operation still ``dispatching`` past its deadline, or,
without a deadline of its own, the ledger's dispatch deadline after its last change
(``FLOWLEDGER_DISPATCH_DEADLINE_SECONDS``, else ``[sweep] dispatch_deadline``)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from flowledger.domain import NewHold, Reason, State, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage.due import OperationsDue
from flowledger.storage.paging import Walk

BY_DEADLINE = OperationsDue(Reason.UNKNOWN_OUTCOME, State.DISPATCHING, "deadline")
WITHOUT_DEADLINE = OperationsDue(
    Reason.UNKNOWN_OUTCOME, State.DISPATCHING, "updated_at", null=("deadline",)
)


@rule(Reason.UNKNOWN_OUTCOME, order=10)
def past_deadline(sweep: Batches) -> int:
    return sweep.walk(partial(_past_deadline, sweep), BY_DEADLINE.walk())


@rule(Reason.UNKNOWN_OUTCOME, order=20)
def without_deadline(sweep: Batches) -> int:
    return sweep.walk(partial(_without_deadline, sweep), WITHOUT_DEADLINE.walk())


def _past_deadline(sweep: Batches, walk: Walk, tx: Tx) -> tuple[int, bool]:
    rows = BY_DEADLINE.read(tx.conn, walk, tx.now, sweep.batch)
    return sweep.open(tx, _targets(rows), locked=True), walk.full


def _without_deadline(sweep: Batches, walk: Walk, tx: Tx) -> tuple[int, bool]:
    due = staleness.cutoff(tx.now, sweep.ledger.dispatch_deadline)
    rows = WITHOUT_DEADLINE.read(tx.conn, walk, due, sweep.batch)
    return sweep.open(tx, _targets(rows), locked=True), walk.full


def _targets(rows: Sequence[Any]) -> list[HoldTarget]:
    return [
        HoldTarget(
            NewHold.of(
                Reason.UNKNOWN_OUTCOME,
                r.cause_key,
                staleness.unknown_outcome_detail(r.deadline, r.execution_id),
            ),
            r.operation_id,
            execution_id=r.execution_id,
            source=r.source,
        )
        for r in rows
    ]
