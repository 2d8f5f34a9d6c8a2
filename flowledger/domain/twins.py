"""Twin triggers: one operation dispatched by two executions of the same workflow within a few
seconds, the mark of a workflow tool that started the workflow twice for one call (n8n's
webhooks fire twice 22 to 155 ms apart in its users' reports).

Whatever each dispatch is answered (the second is usually held ``in_flight`` or skipped, and
writes nothing), the ledger is the one place that sees both: it records the pair once, as an
observation, and keeps one non-blocking ``duplicate_trigger`` hold per workflow and day whose
count grows with every further pair.

Only dispatches that carry the operation's recorded input and version count (another input is
another call, held as ``input_mismatch``). Each operation keeps a :class:`Mark` of the last
execution that dispatched it (the time it was first seen, its workflow) and of the execution
already recorded as its twin, so that a dispatch sent again by either of the pair (n8n's Retry
On Fail) records nothing new.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from flowledger.domain.causes import new_hold
from flowledger.domain.model import NewHold, Reason

DEFAULT_TWIN_WINDOW = timedelta(seconds=5)


class Mark(NamedTuple):
    """The last execution that dispatched an operation: its id, its workflow, when the ledger
    first saw it dispatch, and the execution recorded as its twin (``None`` when none). A
    named tuple: every dispatch from a new execution makes one, and it is the cheapest to
    make."""

    execution_id: str
    workflow_id: str | None
    at: datetime
    twin_of: str | None = None


@dataclass(frozen=True)
class Twin:
    """Two executions of one workflow that dispatched the same operation ``gap_ms`` apart:
    ``first`` is the one the ledger saw first."""

    operation_id: str
    workflow_id: str
    first: str
    second: str
    gap_ms: int

    def executions(self) -> tuple[str, str]:
        """The pair in the order of their ids (numerically when both are numbers, as n8n's
        are): the order the tool started them, which may not be the order they dispatched."""
        a, b = self.first, self.second
        if a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
            return (a, b) if int(a) <= int(b) else (b, a)
        return (a, b) if a <= b else (b, a)

    def said(self) -> str:
        a, b = self.executions()
        return f"{self.gap_ms} ms apart: executions {a} and {b} both dispatched {self.operation_id}"

    def detail(self) -> str:
        """What the hold says, and the handover with it."""
        return (
            f"the workflow tool started workflow {self.workflow_id} twice for one call, "
            f"{self.said()}"
        )


def twin_of(
    mark: Mark | None,
    operation_id: str,
    execution_id: str,
    workflow_id: str | None,
    now: datetime,
    window: timedelta,
) -> Twin | None:
    """The twin this dispatch makes with the operation's last one, or ``None``.

    A twin needs two different executions naming the same workflow (a dispatch without a
    workflow id is never counted: two workflows could share an operation) within ``window``
    of each other. The gap is taken either way round: two receivers whose clocks disagree
    may see the second dispatch "before" the first. A window of zero turns this off."""
    if mark is None or not workflow_id or window <= timedelta(0):
        return None
    if execution_id in (mark.execution_id, mark.twin_of) or mark.workflow_id != workflow_id:
        return None
    gap = abs(now - mark.at)
    if gap > window:
        return None
    return Twin(operation_id, workflow_id, mark.execution_id, execution_id, _millis(gap))


def next_mark(
    mark: Mark | None,
    execution_id: str,
    workflow_id: str | None,
    now: datetime,
    twin: Twin | None,
) -> Mark | None:
    """The operation's mark after this dispatch, or ``None`` when it stays as it is (the same
    execution dispatching again keeps the time it was first seen)."""
    if mark is not None and execution_id in (mark.execution_id, mark.twin_of):
        return None
    return Mark(execution_id, workflow_id, now, twin.first if twin is not None else None)


def twin_hold(twin: Twin, source: str | None, day: date) -> NewHold:
    """The ``duplicate_trigger`` hold of the twin's workflow on ``day`` (one a day: a further
    twin that day adds to its count)."""
    return new_hold(
        Reason.DUPLICATE_TRIGGER,
        twin.detail(),
        source=source or "",
        workflow_id=twin.workflow_id,
        day=day.isoformat(),
    )


def _millis(gap: timedelta) -> int:
    return gap // timedelta(milliseconds=1)


def observed(data: Mapping[str, Any]) -> str:
    """A ``twin_trigger`` event's observation, as ``show``, the TUI and the handover say it
    (in the words the hold's detail uses)."""
    first, second = data.get("executions") or ("?", "?")
    return (
        f"the workflow tool started workflow {data.get('workflow_id')} twice for one call, "
        f"{data.get('gap_ms')} ms apart: executions {first} and {second}"
    )
