"""``source_stale`` (non-blocking): a configured source not synced successfully for ``[sweep]
source_stale_intervals`` of its intervals (counted, for one never synced, from when a sweep first
saw it)."""

from __future__ import annotations

from functools import partial

from flowledger.domain import Reason, staleness
from flowledger.scheduled.sweep.batches import Batches
from flowledger.scheduled.sweep.registry import rule
from flowledger.services.ledger import HoldTarget, Tx
from flowledger.storage import due
from flowledger.storage.sources import ensure_source


@rule(Reason.SOURCE_STALE, order=60)
def source_stale(sweep: Batches) -> int:
    return sweep.drain(partial(_step, sweep))


def _step(sweep: Batches, tx: Tx) -> tuple[int, bool]:
    if not sweep.sources:
        return 0, False
    known = {r.name: r for r in due.sources_named(tx.conn, [s.name for s in sweep.sources])}
    targets = []
    for src in sweep.sources:
        row = known.get(src.name)
        last = row.last_success_at if row is not None else None
        first = row.first_seen_at if row is not None else None
        if row is None or first is None:  # never synced nor seen: it is seen now
            ensure_source(tx, src.name, src.kind, src.base_url)
            first = tx.now
        reference = last or first
        n = sweep.cfg.source_stale_intervals
        if staleness.source_stale_due(reference, src.interval, n, tx.now):
            hold = staleness.source_stale_hold(src.name, last, src.interval, n)
            targets.append(HoldTarget(hold, source=src.name))
    # A handful of rows: one pass, never a second batch.
    return sweep.open(tx, targets), False
