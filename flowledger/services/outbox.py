"""Alerts waiting to be delivered: the rows the hold writer adds to ``outbox``.

One row per (hold, alert URL): each receiver has its own retry state, so one that is down
delays nobody else. A row never stores the URL (a webhook URL often carries a secret in its
path); it stores a *target*, a short hash of the URL, which the deliverer maps back to the
configured URL. The ``delivery_id`` is ``hold:<hold id>:<target>``: the same on every retry, and
unique, so a hold can never be queued twice for one receiver.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flowledger.domain import Reason
from flowledger.domain.times import for_machines


def target_of(url: str) -> str:
    """The name a URL goes by in the outbox: 16 hex digits of its SHA-256."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def targets_of(urls: Iterable[str]) -> dict[str, str]:
    """``{target: url}`` for the configured alert URLs."""
    return {target_of(u): u for u in urls}


def delivery_id(hold_id: int, target: str) -> str:
    return f"hold:{hold_id}:{target}"


@dataclass(frozen=True)
class HoldAlert:
    """What an alert says about a hold (no secret and no raw input is ever in a hold)."""

    hold_id: int
    reason: str
    blocking: bool
    operation_id: str | None
    execution_id: str | None
    source: str | None
    detail: str
    opened_at: datetime
    deadline: datetime
    refers_to: int | None = None

    @property
    def kind(self) -> str:
        return "hold_overdue" if self.reason == Reason.OVERDUE.value else "hold_opened"

    def body(self, delivery: str) -> dict[str, Any]:
        return {
            "delivery_id": delivery,
            "kind": self.kind,
            "hold": {
                "id": self.hold_id,
                "reason": self.reason,
                "blocking": self.blocking,
                "operation_id": self.operation_id,
                "execution_id": self.execution_id,
                "source": self.source,
                "detail": self.detail,
                "opened_at": for_machines(self.opened_at),
                "deadline": for_machines(self.deadline),
                "refers_to": self.refers_to,
            },
        }


def rows_for(alert: HoldAlert, targets: Sequence[str], now: datetime) -> list[dict[str, Any]]:
    """The outbox rows for one hold: one per target, due at once."""
    rows = []
    for target in targets:
        did = delivery_id(alert.hold_id, target)
        rows.append(outbox_row(did, alert.kind, target, alert.body(did), now))
    return rows


def outbox_row(
    delivery: str, kind: str, target: str, body: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """One outbox row: ``body`` for the URL ``target`` names, due at once."""
    return {
        "delivery_id": delivery,
        "kind": kind,
        "payload": json.dumps({"target": target, "body": body}, sort_keys=True),
        "created_at": now,
        "attempts": 0,
        "next_attempt_at": now,
    }
