"""A twin trigger as the dispatch that finds it records it (:mod:`flowledger.domain.twins`):
once, as a ``twin_trigger`` event on the operation naming both executions and the gap, and
on the ``duplicate_trigger`` hold of its workflow and day, opened by the first twin and
counted by every further one.
"""

from __future__ import annotations

from flowledger.domain.twins import Twin, twin_hold
from flowledger.services.counted import Opens, open_or_count
from flowledger.services.port import Tx


def record_twin(rules: Opens, tx: Tx, twin: Twin, source: str | None) -> None:
    """Record ``twin``: its workflow's hold of the day opened, or counted (with the twin
    added to its detail while it is open, as a ``hold_evidence`` event); then the
    observation, naming the hold."""
    hold = twin_hold(twin, source, tx.now.date())
    first, second = twin.executions()
    hold_id, counted = open_or_count(rules, tx, hold, twin.said(), second, source)
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
