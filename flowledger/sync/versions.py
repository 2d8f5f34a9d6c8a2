"""The version check of one sync run: which version of its workflow each execution that
dispatched an operation ran, against the version the workflow had active when it dispatched
(:mod:`flowledger.domain.versions`). A stale one opens, or counts on, the non-blocking
``stale_workflow_version`` hold of its workflow and version pair, and is recorded on the
operation as a ``stale_workflow_version`` event.

Requests, all bounded by ``[[sources]] version_reads`` a run: one read by id for each due
execution not read before (read once: its version never changes), then one read of each
workflow those belong to. Past the bound the rest wait for the next run, oldest first, and the
run's notes say how many. Nothing a tool answers is a reason to hold: an execution it no longer
has, a version it does not say, a workflow whose active version or publish time it does not
say leave the dispatch unjudged, never held.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from flowledger.connectors.base import ConnectorError, Versions
from flowledger.domain.versions import Stale, judge
from flowledger.services.counted import open_or_count
from flowledger.services.ledger import Ledger, Tx
from flowledger.storage import versions

T = TypeVar("T")
Retrying = Callable[[Callable[[], T]], T]


@dataclass
class Checked:
    """What the check did: versions read, dispatches found stale, notes for the run."""

    read: int = 0
    stale: int = 0
    notes: list[str] = field(default_factory=list)


def check_versions(
    ledger: Ledger,
    source: str,
    connector: Versions,
    limit: int,
    retrying: Retrying[Any],
    actor: str,
) -> Checked:
    """Read what is due and judge it (see the module's docstring)."""
    out = Checked()
    with ledger.transaction(actor) as tx:
        rows = versions.due(tx, source, limit)
        waiting = versions.count_unread(tx, source)
    read: dict[int, str | None] = {}
    for row in rows:
        if row.read_at is not None:
            continue
        try:
            version, why = retrying(partial(connector.execution_version, row.external_id))
        except ConnectorError as exc:
            if exc.stops_source:
                raise
            out.notes.append(
                f"version reads stopped at execution {row.external_id}, left for the next "
                f"run: {exc}"
            )
            break
        read[row.id] = version
        if why is not None:
            out.notes.append(f"no workflow version for execution {row.external_id}: {why}")
    out.read = len(read)
    left = waiting - len(read)
    if left > 0:
        out.notes.append(f"{left} executions' workflow versions left to read on the next run")
    judged = [r for r in rows if r.read_at is not None or r.id in read]
    if not judged:
        return out  # nothing to judge: no second write transaction (on SQLite, the lock)
    workflows = sorted(
        {r.workflow_id for r in judged if r.workflow_id and read.get(r.id, r.version_id)}
    )
    active, unread = _active(connector, workflows, retrying, out)
    with ledger.transaction(actor) as tx:
        for workflow_id, (version, since) in active.items():
            versions.seen_active(tx, source, workflow_id, version, since)
        spans = versions.spans(tx, source, workflows)
        for row in judged:
            if row.id in read:
                versions.save_read(tx, row.id, read[row.id])
            if row.workflow_id in unread:
                continue  # judged on the next run, without reading the execution again
            version = read.get(row.id, row.version_id)
            last, stale = _judge(tx, source, row, version, spans.get(row.workflow_id, []))
            for found in stale:
                _record(ledger, tx, found)
            out.stale += len(stale)
            versions.judged(tx, row.id, last)
    return out


def _active(
    connector: Versions, workflows: list[str], retrying: Retrying[Any], out: Checked
) -> tuple[dict[str, tuple[str, datetime]], set[str]]:
    """Each workflow's active version and since when, read once this run; and the workflows
    whose read failed for a reason that may pass."""
    active: dict[str, tuple[str, datetime]] = {}
    unread: set[str] = set()
    for workflow_id in workflows:
        try:
            found, why = retrying(partial(connector.active_version, workflow_id))
        except ConnectorError as exc:
            if exc.stops_source:
                raise
            unread.add(workflow_id)
            out.notes.append(
                f"workflow {workflow_id}'s active version left for the next run: {exc}"
            )
            continue
        if found is None:
            out.notes.append(f"no active version for workflow {workflow_id}: {why}")
        else:
            active[workflow_id] = found
    return active, unread


def _judge(
    tx: Tx, source: str, row: Any, version: str | None, spans: list[Any]
) -> tuple[int, list[Stale]]:
    """The last attempt row of the execution's and its stale dispatches (one an operation)."""
    attempts = versions.dispatches(tx, row.external_id, row.judged_attempt)
    last = max((a.id for a in attempts), default=row.judged_attempt)
    mine = [
        a
        for a in attempts
        if (a.source is None or a.source == source)
        and (not a.workflow_id or not row.workflow_id or a.workflow_id == row.workflow_id)
    ]
    if version is None or not row.workflow_id:
        return last, []
    first: dict[str, datetime] = {}
    for a in mine:
        first.setdefault(a.operation_id, a.dispatched_at)
    stale = judge(
        source, row.workflow_id, row.external_id, version, row.started_at, first.items(), spans
    )
    return last, stale


def _record(ledger: Ledger, tx: Tx, stale: Stale) -> None:
    hold_id, opened = open_or_count(
        ledger, tx, stale.hold(), stale.said(), stale.execution_id, stale.source
    )
    tx.event(
        "stale_workflow_version",
        stale.operation_id,
        {
            "source": stale.source,
            "workflow_id": stale.workflow_id,
            "execution_id": stale.execution_id,
            "ran": stale.ran,
            "active": stale.active,
            "opened_hold": opened,
        },
        hold_id=hold_id,
    )
