"""The executions the ledger keeps copies of."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from flowledger.storage.reads import execution_copies as executions
from flowledger.tui.format import clip, clock_time, middle, text
from flowledger.tui.messages import OpenExecution
from flowledger.tui.panes.listing import Cell, ListPane


class ExecutionsPane(ListPane):
    """The ledger's copies of execution records, most recently started first (as the CLI
    lists them); pruned ones say when."""

    COLUMNS = [
        ("source", "source"),
        ("id", "execution"),
        ("workflow", "workflow"),
        ("status", "status"),
        ("started", "started"),
        ("stopped", "stopped"),
        ("retry_of", "retry of"),
        ("gone", "gone"),
    ]
    FILTER_HINT = "/ filter: id, workflow, status, source; gone"
    # The workflow takes what is left; narrower screens drop the retry, the stop time and the
    # source first (enter shows an execution in full).
    WIDTHS = {
        "source": 12,
        "id": 10,
        "status": 8,
        "started": 11,
        "stopped": 11,
        "retry_of": 9,
        "gone": 11,
    }
    FLEX = ("workflow", 12, 40)
    DROP = ("retry_of", "stopped", "source")
    NEWEST_FIRST = True

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        return executions.search_executions(
            self.ctx.store,
            text=self.filter_text,
            after_id=after["id"] if after else None,
            limit=limit,
        )

    def key(self, row: dict[str, Any]) -> str:
        return str(row["id"])

    def opened(self, row: dict[str, Any]) -> OpenExecution:
        return OpenExecution(row)

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        now = self.ctx.now()
        status = row["status"]
        style = "red" if status in ("error", "crashed") else "yellow" if not row["final"] else ""
        name = row["workflow_name"] or row["workflow_id"]
        return [
            Text(clip(row["source"] or "-", self.widths["source"])),
            Text(middle(row["external_id"], self.widths["id"])),
            Text(clip(name or "-", self.widths["workflow"])),
            text(status, style=style),
            clock_time(row["started_at"], now),
            clock_time(row["stopped_at"], now),
            text(row["retry_of"]),
            Text(clock_time(row["gone_at"], now), style="dim") if row["gone_at"] else "",
        ]
