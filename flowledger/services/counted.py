"""Holds that count their causes: a non-blocking hold about a workflow rather than an
operation (``duplicate_trigger``, ``stale_workflow_version``), opened by its first cause and
counted by every further one, with the further cause added to its detail while it is open
(a ``hold_evidence`` event). A resolved one is counted, never reopened."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from flowledger.domain import NewHold
from flowledger.services.holds import evidence_event
from flowledger.services.port import Tx
from flowledger.services.values import HoldTarget


class Opens(Protocol):
    """How the ledger opens holds (:meth:`flowledger.services.ledger.Ledger.open_holds`)."""

    def open_holds(
        self, tx: Tx, targets: Sequence[HoldTarget], *, locked: bool = False
    ) -> list[int | None]: ...


def open_or_count(
    rules: Opens,
    tx: Tx,
    hold: NewHold,
    evidence: str,
    execution_id: str | None,
    source: str | None,
) -> tuple[int | None, bool]:
    """Open ``hold`` or count ``evidence`` on the hold its cause has: the hold's id (``None``
    only when neither happened) and whether this cause opened it."""
    # Counted on the cause's hold when it has one, before any insert: an insert its unique
    # index turns away still takes a PostgreSQL sequence value (hold ids with gaps).
    found = tx.count_cause(hold.cause_key, evidence)
    if found is None:
        # The hold concerns no operation, so no operation's lock is taken for it (a caller
        # that dispatches holds its operation's lock already).
        target = HoldTarget(hold, None, execution_id, source)
        (hold_id,) = rules.open_holds(tx, [target], locked=True)
        if hold_id is not None:
            return hold_id, True
        found = tx.count_cause(hold.cause_key, evidence)  # another writer opened it meanwhile
    if found is None:
        return None, False
    hold_id, still_open = found
    if still_open:
        evidence_event(tx, None, hold_id, hold, evidence, execution_id)
    return hold_id, False
