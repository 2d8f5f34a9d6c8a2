"""The attention queue: open holds, soonest deadline first, sorted by any column."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.widgets import DataTable

from flowledger.domain import is_overdue
from flowledger.storage.reads import hold_queue as holds
from flowledger.tui.context import Context
from flowledger.tui.format import age, clip, deadline_cell, middle, text
from flowledger.tui.messages import OpenHold
from flowledger.tui.panes.listing import Cell, ListPane, Searched

SORT_ORDER = ["deadline", "opened", "reason", "state", "owner", "workflow", "operation"]
# The column each sort orders by (a sort is offered while its column is shown).
SORT_COLUMN = {
    "deadline": "deadline",
    "opened": "age",
    "reason": "reason",
    "state": "state",
    "owner": "owner",
    "workflow": "workflow",
    "operation": "operation",
}
HEADER_SORT = {
    "operation": "operation",
    "reason": "reason",
    "state": "state",
    "age": "opened",
    "deadline": "deadline",
    "owner": "owner",
    "workflow": "workflow",
}


class QueuePane(ListPane):
    """Open holds, soonest deadline first; overdue ones in red. ``s`` sorts by the next
    column, ``S`` reverses the order."""

    HOLDS = True

    COLUMNS = [
        ("hold", "hold"),
        ("operation", "operation"),
        ("reason", "reason"),
        ("state", "state"),
        ("age", "age"),
        ("deadline", "deadline"),
        ("owner", "owner"),
        ("workflow", "workflow"),
        ("execution", "execution"),
    ]
    # Whole in an 80-column terminal, where the input shows 74 characters; the help (?) lists
    # every pair.
    FILTER_HINT = "/ filter: words, reason: owner: state: op: source:, overdue, blocking"
    EAGER = True  # the first thing on screen
    # The operation takes what is left; narrower screens drop the execution's status first,
    # then the workflow, owner, age and the operation's state.
    WIDTHS = {
        "hold": 5,
        "reason": 16,
        "state": 11,
        "age": 6,
        "deadline": 13,
        "owner": 8,
        "workflow": 12,
        "execution": 10,
    }
    FLEX = ("operation", 20, 40)
    DROP = ("execution", "workflow", "owner", "age", "state")

    def __init__(self, ctx: Context, *, id: str) -> None:
        super().__init__(ctx, id=id)
        self.sort = "deadline"
        self.descending = False

    def _filter(self) -> holds.HoldFilter:
        return holds.HoldFilter.parse(self.filter_text)

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        # A filter is searched a window of open holds at a time.
        found = holds.search_hold_queue(
            self.ctx.store,
            self.ctx.now(),
            flt=self._filter(),
            sort=self.sort,
            descending=self.descending,
            limit=limit,
            offset=offset,
            after=after,
            window=self.window(after),
        )
        return Searched(found.rows, found.resume, found.read)

    def count(self) -> int | None:
        return holds.count_hold_queue(self.ctx.store, self.ctx.now(), flt=self._filter())

    def key(self, row: dict[str, Any]) -> str:
        return str(row["id"])

    def opened(self, row: dict[str, Any]) -> OpenHold:
        return OpenHold(row["id"])

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        now = self.ctx.now()
        overdue = is_overdue(row["deadline"], now)
        style = "red" if overdue else ""
        reason = Text(clip(row["reason"], 16), style="bold yellow" if row["blocking"] else "")
        subject = middle(
            row["operation_id"] or f"source {row['source'] or '-'}", self.widths["operation"]
        )
        return [
            Text(str(row["id"]), style=style),
            Text(subject, style=style),
            reason,
            text(row["operation_state"]),
            age(row["opened_at"], now),
            deadline_cell(row["deadline"], now),
            text(row["owner"]),
            text(row["workflow_id"]),
            text(row["execution_status"]),
        ]

    def status_suffix(self) -> str:
        return f"  sorted by {self.sort} {'↓' if self.descending else '↑'}"

    def nothing_listed(self) -> str:
        if self.filter_text:
            return "No open hold matches the filter"
        return "Nothing needs you: no open holds"

    def set_sort(self, sort: str, descending: bool | None = None) -> None:
        if descending is None:
            descending = not self.descending if sort == self.sort else False
        self.sort, self.descending = sort, descending
        self.resume, self.read = None, 0
        self.reload(keep_cursor=True)

    def action_sort(self) -> None:
        self.next_sort()

    def action_reverse(self) -> None:
        self.set_sort(self.sort, not self.descending)

    def next_sort(self) -> None:
        """The next sort by a column shown at this width (a narrow screen hides some)."""
        shown = [s for s in SORT_ORDER if SORT_COLUMN[s] in self.shown_keys]
        after = SORT_ORDER[SORT_ORDER.index(self.sort) + 1 :] + SORT_ORDER
        self.set_sort(next(s for s in after if s in shown), False)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        sort = HEADER_SORT.get(str(event.column_key.value))
        if sort is not None:
            self.set_sort(sort)
