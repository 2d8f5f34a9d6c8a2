"""Linking executions to operations, each link one ``execution_linked`` event, written once.

An execution is linked to an operation when one of the operation's attempts carries its id
(the workflow sent ``execution_id`` with dispatch), when it retried such an execution
(``retryOf``, followed up the chain: a retry may write again without dispatching), or when it
declared the operation itself (n8n ``customData``). The event log is where links are looked up.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flowledger.connectors.base import ExecutionRecord
from flowledger.services.ledger import Tx
from flowledger.storage import executions
from flowledger.storage import versions as execution_versions

MAX_CHAIN = 20


def link(tx: Tx, source: str, records: Sequence[ExecutionRecord], *, versions: bool = False) -> int:
    """Write one ``execution_linked`` event per (operation, execution) not linked before.
    ``versions``: an execution linked by its dispatch is due for the version check
    (:mod:`flowledger.sync.versions`)."""
    found: list[tuple[str, ExecutionRecord, dict[str, Any]]] = []
    for op, record in _by_attempt(tx, source, records):
        found.append((op, record, {"via": "attempt"}))
    for op, record, origin in _by_retry(tx, source, records):
        found.append((op, record, {"via": "retry_of", "origin": origin}))
    declared = {r.operation_id for r in records if r.operation_id}
    if declared:
        known = executions.known_operations(tx, sorted(declared))
        for record in records:
            if record.operation_id is not None and record.operation_id in known:
                found.append((record.operation_id, record, {"via": "custom_data"}))
    if not found:
        return 0
    done = _linked(tx, {op for op, _, _ in found})
    count = 0
    dispatched: dict[str, str | None] = {}
    for op, record, how in found:
        key = (op, source, record.external_id)
        if key in done:
            continue
        done.add(key)
        if how["via"] == "attempt":
            dispatched[record.external_id] = record.workflow_id
        tx.event(
            "execution_linked",
            op,
            {
                "source": source,
                "execution_id": record.external_id,
                "workflow_id": record.workflow_id,
                "status": record.status,
                **how,
            },
        )
        count += 1
    if versions and dispatched:
        execution_versions.mark_due(tx, source, sorted(dispatched.items()))
    return count


def _matches(row: Any, source: str, workflow_id: str | None) -> bool:
    """An attempt names its source and workflow when the workflow sent them; when it did,
    they must agree (execution ids repeat across tool instances)."""
    if row.source is not None and row.source != source:
        return False
    return not (row.workflow_id and workflow_id and row.workflow_id != workflow_id)


def _attempts(tx: Tx, execution_ids: set[str]) -> list[Any]:
    if not execution_ids:
        return []
    return executions.attempts_of(tx, sorted(execution_ids))


def _by_attempt(
    tx: Tx, source: str, records: Sequence[ExecutionRecord]
) -> list[tuple[str, ExecutionRecord]]:
    by_id = {r.external_id: r for r in records}
    out = []
    for row in _attempts(tx, set(by_id)):
        record = by_id[row.execution_id]
        if _matches(row, source, record.workflow_id):
            out.append((row.operation_id, record))
    return out


def _by_retry(
    tx: Tx, source: str, records: Sequence[ExecutionRecord]
) -> list[tuple[str, ExecutionRecord, str]]:
    """Operations dispatched by any execution up the ``retryOf`` chain of a record."""
    out = []
    batch = {r.external_id: r for r in records}
    for record in records:
        chain: list[str] = []
        parent = record.retry_of
        while parent and parent not in chain and len(chain) < MAX_CHAIN:
            chain.append(parent)
            upper = batch.get(parent)
            if upper is not None:
                parent = upper.retry_of
                continue
            parent = executions.retry_of(tx, source, parent)
        for row in _attempts(tx, set(chain)):
            if _matches(row, source, record.workflow_id):
                out.append((row.operation_id, record, row.execution_id))
    return out


def _linked(tx: Tx, operation_ids: set[str]) -> set[tuple[str, str, str]]:
    done = set()
    for row in executions.links_of(tx, sorted(operation_ids)):
        d = json.loads(row.data)
        done.add((row.operation_id, d.get("source"), d.get("execution_id")))
    return done
