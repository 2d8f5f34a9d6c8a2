"""What a sync writes of a page, always inside the caller's transaction: execution copies
(their values redacted and merged, see :func:`store_records`) and their links (see
``links``). The statements are :mod:`flowledger.storage.executions`'."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowledger.connectors.base import ExecutionRecord
from flowledger.services.ledger import Tx
from flowledger.storage import executions
from flowledger.storage.executions import FIELDS, TIMES
from flowledger.sync import links


@dataclass
class Written:
    new: int = 0
    changed: int = 0
    linked: int = 0


NAME_LENGTH = 400  # the workflow_name column


def _values(
    record: ExecutionRecord, tx: Tx, clean: Callable[[str], str], kept_extra: str | None = None
) -> dict[str, Any]:
    """The columns for ``record`` as bound to a statement (times through ``tx.time``), its
    texts redacted (``clean``); what the copy already had in ``extra`` stays unless the record
    says otherwise (a link read once from customData is not lost on a later read). Every
    ``extra`` value is short by construction, far inside the column's 8,000."""
    values = {
        name: tx.time(getattr(record, name)) if name in TIMES else getattr(record, name)
        for name in FIELDS
    }
    if isinstance(record.workflow_name, str):  # a name is free text; ids stay exact
        values["workflow_name"] = clean(record.workflow_name)[:NAME_LENGTH]
    extra = json.loads(kept_extra) if kept_extra else {}
    extra.update(
        (key, clean(value) if isinstance(value, str) else value)
        for key, value in record.extra.items()
    )
    if record.operation_id:
        extra["operation_id"] = record.operation_id
    values["extra"] = json.dumps(extra, sort_keys=True) if extra else None
    return values


def store_records(
    tx: Tx,
    source: str,
    records: Sequence[ExecutionRecord],
    redact: Callable[[str], str],
    *,
    versions: bool = False,
) -> Written:
    """Insert new copies, update changed ones (a copy the tool shows again is no longer
    gone), and link them. Records repeated in one batch count once, the last one winning.
    Values are bound as Core binds them (``tx.time``), so a copy compares equal however it
    was written. Their free texts are stored as ``redact`` (the ledger's) makes them, each
    text redacted once a page: names repeat. ``versions``: see :func:`links.link`."""
    latest = {r.external_id: r for r in records}
    out = Written()
    if not latest:
        return out
    existing = executions.existing(tx, source, list(latest))
    if existing:
        executions.seen(tx, [row.id for row in existing.values()])
    redacted: dict[str, str] = {}

    def clean(text: str) -> str:
        out = redacted.get(text)
        if out is None:
            out = redacted[text] = redact(text)
        return out

    inserts = []
    for ext_id, record in latest.items():
        row = existing.get(ext_id)
        if row is None:
            values = _values(record, tx, clean)
            values.update(
                source=source,
                external_id=ext_id,
                first_seen_at=tx.db_now,
                last_seen_at=tx.db_now,
            )
            inserts.append(values)
            continue
        values = _values(record, tx, clean, row.extra)
        if row.gone_at is not None or any(row[k] != v for k, v in values.items()):
            out.changed += 1
            executions.change(tx, row.id, values)
    if inserts:
        executions.add(tx, inserts)
        out.new = len(inserts)
    out.linked = links.link(tx, source, list(latest.values()), versions=versions)
    return out
