"""The handover's part about what the ledger did in n8n: retries asked, and the executions it
pinned for holds now resolved (:mod:`flowledger.reports.handover`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from flowledger.storage import acting
from flowledger.storage.engine import Store


def in_n8n(
    store: Store,
    since: datetime,
    cell: Callable[[Any], str],
    when: Callable[[datetime | None], str],
) -> list[str]:
    """The retries asked in n8n during the shift (or still waiting), each with the new
    execution or n8n's refusal; and the executions pinned for holds now resolved, which n8n
    keeps until a person deletes them. Nothing when there is neither. ``cell`` makes a value
    safe in a Markdown table cell, ``when`` writes a time as the report does."""
    with store.reader.connect() as conn:
        retries = acting.retries_since(conn, since)
        kept = acting.pinned_after_holds(conn)
    out: list[str] = []
    if retries:
        out += [
            "## Retries asked in n8n",
            "",
            "| asked at | hold | operation | execution | by | new execution |",
            "|---|---|---|---|---|---|",
        ]
        for r in retries:
            if r["outcome"] == "retried":
                new = cell(r["new_execution_id"])
            elif r["outcome"] == "refused":
                new = f"refused: {cell(r['last_error'])}"
            else:
                new = "**waiting**" + (f": {cell(r['last_error'])}" if r["last_error"] else "")
            out.append(
                f"| {when(r['asked_at'])} | {r['hold_id']} | {cell(r['operation_id'])} "
                f"| {cell(r['execution_id'])} | {cell(r['asked_by'])} | {new} |"
            )
        out.append("")
    if kept:
        out += [
            "## Pinned in n8n for resolved holds",
            "",
            f"{len(kept)} executions are kept from n8n's pruning for holds that are all "
            "resolved now; n8n keeps them until they are deleted "
            "(`flowledger sources delete-pinned SOURCE`, asked first).",
            "",
            "| source | execution | pinned | holds resolved | ledger copy |",
            "|---|---|---|---|---|",
        ]
        for p in kept:
            out.append(
                f"| {cell(p['source'])} | {cell(p['execution_id'])} | {when(p['pinned_at'])} "
                f"| {when(p['resolved_at'])} | {cell(p['copy_status'] or 'no copy')} |"
            )
        out.append("")
    return out
