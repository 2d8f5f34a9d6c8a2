"""A twin trigger as the dispatch that finds it records it (:mod:`flowledger.domain.twins`):
once, as a ``twin_trigger`` event on the operation naming both executions and the gap, and
on the ``duplicate_trigger`` hold of its workflow and day, opened by the first twin and
counted by every further one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from flowledger.domain import NewHold
from flowledger.domain.twins import Twin, twin_hold
from flowledger.services.port import Tx
from flowledger.services.values import HoldTarget


class Opens(Protocol):
    """How the ledger opens holds (:meth:`flowledger.services.ledger.Ledger.open_holds`)."""

    def open_holds(
        self, tx: Tx, targets: Sequence[HoldTarget], *, locked: bool = False
    ) -> list[int | None]: ...


def record_twin(rules: Opens, tx: Tx, twin: Twin, source: str | None) -> None:
    """Record ``twin``: its workflow's hold of the day opened, or counted (with the twin
    added to its detail while it is open, as a ``hold_evidence`` event); then the
    observation, naming the hold."""
    hold: NewHold = twin_hold(twin, source, tx.now.date())
    first, second = twin.executions()
    # The hold concerns no operation (a workflow's twins of a day may name several), so no
    # operation's lock is taken for it: the caller holds this one's already.
    (hold_id,) = rules.open_holds(tx, [HoldTarget(hold, None, second, source)], locked=True)
    counted = 1
    if hold_id is None:  # the day's hold exists: count this twin on it
        found = tx.count_cause(hold.cause_key, twin.said())
        if found is not None:
            hold_id, still_open = found
            counted = 0
            if still_open:
                data = {
                    "reason": hold.reason.value,
                    "evidence": twin.said(),
                    "cause_key": hold.cause_key,
                    "execution_id": second,
                }
                tx.event("hold_evidence", None, data, hold_id=hold_id)
    tx.event(
        "twin_trigger",
        twin.operation_id,
        {
            "workflow_id": twin.workflow_id,
            "source": source,
            "executions": [first, second],
            "first_dispatch": twin.first,
            "gap_ms": twin.gap_ms,
            "opened_hold": bool(counted),
        },
        hold_id=hold_id,
    )
