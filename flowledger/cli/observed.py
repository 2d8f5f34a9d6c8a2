"""What the ledger saw about an operation that no hold of the operation's own says: each kind
of observation event ``show`` lists in a section of its own, in the words of its hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flowledger.cli.tables import when
from flowledger.domain import twins, versions

# (section title, event kind, how one is said)
SECTIONS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("twin triggers", "twin_trigger", twins.observed),
    ("outdated workflow versions", "stale_workflow_version", versions.observed),
)


def rows(
    events: list[dict[str, Any]], kind: str, said: Callable[..., str]
) -> list[tuple[object, ...]]:
    """The section's rows: when, what, and the hold that counts it."""
    return [
        (
            when(ev["at"]),
            said(ev["data"]),
            f"hold [{ev['hold_id']}]" if ev["hold_id"] is not None else "",
        )
        for ev in events
        if ev["kind"] == kind
    ]
