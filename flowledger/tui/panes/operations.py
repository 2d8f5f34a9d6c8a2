"""Every operation, most recently changed first, filtered by state and text."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text

from flowledger.storage.reads import operation_pages as operations
from flowledger.tui.context import Context
from flowledger.tui.format import STATE_STYLES, age, middle
from flowledger.tui.messages import OpenOperation
from flowledger.tui.panes.listing import Cell, ListPane, Searched

COUNT_FOR_SECONDS = 60.0


class OperationsPane(ListPane):
    """Every operation, most recently changed first, with its open holds."""

    COLUMNS = [
        ("operation", "operation"),
        ("state", "state"),
        ("attempt", "att"),
        ("execution", "last exec"),
        ("receipt", "receipt"),
        ("holds", "holds"),
        ("changed", "changed"),
        ("age", "age"),
    ]
    FILTER_HINT = "/ filter: a state (failed) and words of the id, execution or receipt"
    NEWEST_FIRST = True
    # The operation takes what is left; narrower screens drop the time of the last change
    # first, then the receipt, the age and the last execution.
    WIDTHS = {
        "state": 11,
        "attempt": 4,
        "execution": 10,
        "receipt": 14,
        "holds": 5,
        "changed": 7,
        "age": 6,
    }
    FLEX = ("operation", 24, 60)
    DROP = ("changed", "receipt", "age", "execution")

    def __init__(self, ctx: Context, *, id: str) -> None:
        super().__init__(ctx, id=id)
        self._counted_for: tuple[str, float, int | None] = ("", -COUNT_FOR_SECONDS, None)

    def _filter(self) -> operations.OperationFilter:
        return operations.OperationFilter.parse(self.filter_text)

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        # Words are searched a window of each state's operations at a time, as the queue's
        # filters are.
        found = operations.search_operations(
            self.ctx.store,
            flt=self._filter(),
            after=operations.After(after["updated_at"], after["operation_id"]) if after else None,
            limit=limit,
            window=self.window(after),
        )
        return Searched(found.rows, found.resume, found.read)

    def count(self) -> int | None:
        # Counting ten million rows takes a while: a refresh reuses a recent count of the
        # same filter rather than repeating it every few seconds.
        now = time.monotonic()
        text, at, total = self._counted_for
        if text != self.filter_text or now - at > COUNT_FOR_SECONDS:
            total = operations.count_operations(self.ctx.store, flt=self._filter())
            self._counted_for = (self.filter_text, now, total)
        return total

    def key(self, row: dict[str, Any]) -> str:
        return str(row["operation_id"])

    def opened(self, row: dict[str, Any]) -> OpenOperation:
        return OpenOperation(row["operation_id"])

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        now = self.ctx.now()
        held = row["open_holds"]
        return [
            Text(middle(row["operation_id"], self.widths["operation"])),
            Text(row["state"], style=STATE_STYLES.get(row["state"], "")),
            f"{row['attempt']}/{row['max_attempts']}",
            Text(middle(row["execution_id"] or "-", self.widths["execution"])),
            Text(middle(row["receipt"] or "-", self.widths["receipt"])),
            Text(str(held), style="bold yellow") if held else "-",
            age(row["updated_at"], now),
            age(row["created_at"], now),
        ]
