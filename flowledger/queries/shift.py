"""What happened during a shift beyond what it resolved, and what is about to need someone:
the reads behind the handover report's newer sections (:mod:`flowledger.queries.handover`
writes them)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowledger.connectors import registry
from flowledger.queries.executions import executions_by_ref, source_urls
from flowledger.queries.records import event_dict
from flowledger.storage.engine import Store
from flowledger.storage.views import shift as rows

LIMIT = 200  # rows a section lists; its heading says when there were more
CHANGES = ("hold_extended", "hold_assigned")
CONFIRMING = ("confirmed_with_evidence", "confirmed_by_receipt")


@dataclass(frozen=True)
class Activity:
    opened: list[dict[str, Any]]
    changes: list[dict[str, Any]]  # hold_extended / hold_assigned events
    in_flight: list[dict[str, Any]]  # dispatching with no open hold
    alerts_waiting: int
    alerts: list[dict[str, Any]]  # the oldest undelivered, each with its hold and receiver


def activity(store: Store, since: datetime, until: datetime) -> Activity:
    with store.reader.connect() as conn:
        opened = rows.opened(conn, since, until, limit=LIMIT)
        found = rows.events_of_kinds(conn, CHANGES, since, until, limit=LIMIT)
        in_flight = rows.dispatching_unheld(conn, limit=LIMIT)
        waiting, alerts = rows.undelivered(conn, limit=LIMIT)
    return Activity(opened, [event_dict(e) for e in found], in_flight, waiting, _alerts(alerts))


def _alerts(outbox: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each alert's hold and receiver: the receiver by the name the outbox gives it (a hash
    of its URL, which may carry a token; ``flowledger.services.outbox.target_of``)."""
    out = []
    for row in outbox:
        payload = json.loads(row["payload"])
        hold = payload.get("body", {}).get("hold", {})
        receiver = payload.get("target") or "-"
        out.append(
            {**row, "hold_id": hold.get("id"), "reason": hold.get("reason"), "receiver": receiver}
        )
    return out


def receipts(store: Store, resolved: list[dict[str, Any]]) -> dict[int, str | None]:
    """The receipt each confirming resolution left its operation with, by hold id."""
    confirming = [r for r in resolved if r["resolution"] in CONFIRMING and r["operation_id"]]
    with store.reader.connect() as conn:
        now = rows.receipts(conn, [r["operation_id"] for r in confirming])
    return {r["id"]: now.get(r["operation_id"]) for r in confirming}


def execution_links(store: Store, held: list[dict[str, Any]]) -> dict[str, str]:
    """The tool's page of each execution the rows name (``execution_id`` with ``source``),
    where the ledger keeps a copy of it and its source's kind has pages."""
    refs = sorted({h["execution_id"] for h in held if h.get("execution_id")})
    if not refs:
        return {}
    urls = source_urls(store)
    links: dict[str, str] = {}
    for copy in executions_by_ref(store, refs):
        kind, base = urls.get(copy["source"], (None, None))
        url = registry.execution_url(kind, base, copy.get("workflow_id"), copy["external_id"])
        if url is not None:
            links.setdefault(copy["external_id"], url)
    return links
