"""Stale workflow versions: an execution that dispatched an operation while running a version of
its workflow other than the one active then (n8n issues #30607, #25381: outdated versions still
firing; and an execution started before a re-publish, which runs the version it started with).

What the tool tells (n8n: :meth:`flowledger.connectors.n8n.N8nConnector.execution_version`
and ``active_version``): the version an execution ran, and a workflow's active version with
the time of its last activation. The ledger keeps every (version, activated at) it reads
with the last time it saw it still active: the version was active at least from the one to
the other. A dispatch is judged only against such
a span; a dispatch outside every span the ledger saw is never held (it may not know a version
that came and went between two syncs).

Times: the span's start is n8n's clock, its end and the dispatch the ledger's. A dispatch
counts as after a publish only :data:`CLOCK_MARGIN` past it; an execution that n8n says started
after the publish needs no margin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flowledger.domain.causes import new_hold
from flowledger.domain.model import NewHold, Reason

CLOCK_MARGIN = timedelta(seconds=2)


@dataclass(frozen=True)
class Active:
    """The version a workflow had active from ``since`` (n8n's time of its last
    ``activated`` event) at least until ``seen`` (when the ledger last read it active)."""

    version_id: str
    since: datetime
    seen: datetime

    def covers(self, dispatched: datetime, started: datetime | None) -> bool:
        """Whether the dispatch fell in the span: an execution n8n says started after the
        publish, or a dispatch the margin after it; either no later than the last read."""
        if dispatched > self.seen:
            return False
        return (started is not None and started >= self.since) or (
            dispatched >= self.since + CLOCK_MARGIN
        )


def active_at(
    spans: Iterable[Active], dispatched: datetime, started: datetime | None
) -> str | None:
    """The version the ledger knows was active at the dispatch, or ``None`` when it does not
    know (no span covers it, or two that disagree)."""
    found = {s.version_id for s in spans if s.covers(dispatched, started)}
    return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class Stale:
    """Execution ``execution_id`` of workflow ``workflow_id`` ran version ``ran`` and
    dispatched ``operation_id`` while ``active`` was the active one."""

    source: str
    workflow_id: str
    execution_id: str
    operation_id: str
    ran: str
    active: str

    def said(self) -> str:
        return (
            f"execution {self.execution_id} ran version {self.ran} and dispatched "
            f"{self.operation_id} while {self.active} was active"
        )

    def detail(self) -> str:
        """What the hold says, and the handover with it."""
        return f"workflow {self.workflow_id} ran an outdated version: {self.said()}"

    def hold(self) -> NewHold:
        """The ``stale_workflow_version`` hold of the workflow and the version pair (one
        each: a further execution of the pair counts on it)."""
        return new_hold(
            Reason.STALE_WORKFLOW_VERSION,
            self.detail(),
            source=self.source,
            workflow_id=self.workflow_id,
            ran=self.ran,
            active=self.active,
        )


def judge(
    source: str,
    workflow_id: str,
    execution_id: str,
    ran: str,
    started: datetime | None,
    dispatches: Iterable[tuple[str, datetime]],
    spans: Iterable[Active],
) -> list[Stale]:
    """The stale dispatches among ``dispatches`` (operation id, when) of one execution."""
    spans = list(spans)
    out = []
    for operation_id, dispatched in dispatches:
        active = active_at(spans, dispatched, started)
        if active is not None and active != ran:
            out.append(Stale(source, workflow_id, execution_id, operation_id, ran, active))
    return out


def observed(data: Mapping[str, Any]) -> str:
    """A ``stale_workflow_version`` event's observation, as ``show``, the TUI and the
    handover say it."""
    return (
        f"execution {data.get('execution_id')} of workflow {data.get('workflow_id')} ran "
        f"version {data.get('ran')} while {data.get('active')} was active"
    )
