"""The handover's sections of the holds that count their causes, about a workflow rather than
an operation: twin triggers (``duplicate_trigger``) and outdated workflow versions
(``stale_workflow_version``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowledger.domain import Reason
from flowledger.domain.display import counted
from flowledger.storage.engine import Store
from flowledger.storage.reads.hold_queue import list_open_holds

Cell = Callable[[Any], str]  # a value as a table cell of the report


def sections(store: Store, page: int, cell: Cell) -> list[str]:
    """Both sections, each of the first ``page`` open holds of its reason (none: no section)."""
    twin = list_open_holds(store, limit=page, reason=Reason.DUPLICATE_TRIGGER.value)
    stale = list_open_holds(store, limit=page, reason=Reason.STALE_WORKFLOW_VERSION.value)
    return twins(twin, cell) + stale_versions(stale, cell)


def twins(holds: list[dict[str, Any]], cell: Cell) -> list[str]:
    """The open ``duplicate_trigger`` holds: a workflow the tool started twice for one call,
    each with how many times that day (its detail names the first twin and the next ones)."""
    return _counted(
        "Twin triggers",
        "The workflow tool started a workflow twice for one call; the ledger let at most one "
        "of each pair write. One hold per workflow and day; dismiss it once the trigger is "
        "explained (docs/operations.md).",
        holds,
        "twin",
        cell,
    )


def stale_versions(holds: list[dict[str, Any]], cell: Cell) -> list[str]:
    """The open ``stale_workflow_version`` holds: executions that dispatched while running a
    version of their workflow other than the active one."""
    return _counted(
        "Outdated workflow versions",
        "Executions that dispatched an operation while running a version of their workflow "
        "other than the one active then. One hold per workflow and version pair; check what the "
        "old version wrote, then dismiss it (docs/operations.md).",
        holds,
        "execution",
        cell,
    )


def _counted(
    title: str, intro: str, holds: list[dict[str, Any]], unit: str, cell: Cell
) -> list[str]:
    """A section of holds that count their causes, each with its count and detail."""
    if not holds:
        return []
    out = [f"## {title}", "", intro, ""]
    for h in holds:
        times = counted(h["occurrences"], unit)
        out.append(f"- hold {h['id']} ({times}, {cell(h['source'] or 'no source')}): "
                   f"{cell(h['detail'])}")  # fmt: skip
    return [*out, ""]
