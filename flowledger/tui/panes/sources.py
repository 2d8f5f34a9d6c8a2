"""The configured sources: last sync, lag and errors, and a broken ``flowledger.toml``."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from flowledger.domain.display import visible
from flowledger.storage.reads import records as queries
from flowledger.tui.context import Context
from flowledger.tui.format import age, clip, clock_time, text
from flowledger.tui.panes.listing import Cell
from flowledger.tui.tabs import Pane


class SourcesPane(Pane):
    """Each source: last sync attempt, lag since the last success, last error; above them,
    when ``flowledger.toml`` could not be read, why, and that sync is off until it is fixed."""

    COLUMNS = ["source", "kind", "status", "last attempt", "lag", "last error", "base URL"]
    # Every column but the error keeps its width; the error takes what is left and wraps
    # (a row grows a line at a time). Where the error would get fewer than 30 cells the base
    # URL is left out, then the kind.
    WIDTHS = {"source": 16, "kind": 7, "status": 8, "last attempt": 12, "lag": 7, "base URL": 30}
    OPTIONAL = ("base URL", "kind")
    loaded = False

    def __init__(self, ctx: Context, *, id: str) -> None:
        super().__init__(id=id)
        self.ctx = ctx
        self.rows: list[dict[str, Any]] = []
        self.error_width = 40
        self.shown = set(self.COLUMNS)

    def compose(self) -> ComposeResult:
        problem = self.ctx.config_error
        if problem:
            yield Static(
                Text(
                    f"{visible(problem)} — sync is off until it is fixed (`flowledger run` "
                    "and `sync` refuse to start); this view uses the default settings",
                    style="bold red",
                ),
                id="config-error",
            )
        table: DataTable[Cell] = DataTable(cursor_type="row", zebra_stripes=True)
        self._add_columns(table)
        yield table

    def _add_columns(self, table: DataTable[Cell]) -> None:
        for label in self.COLUMNS:
            if label == "last error":
                table.add_column(label, width=self.error_width)
            elif label in self.shown:
                table.add_column(label, width=self.WIDTHS[label])

    def on_resize(self, event: events.Resize) -> None:
        shown = set(self.COLUMNS)
        optional = list(self.OPTIONAL)
        while True:
            fixed = sum(self.WIDTHS[k] + 2 for k in shown if k != "last error") + 2 + 2
            if event.size.width - fixed >= 30 or not optional:
                break
            shown.discard(optional.pop(0))
        error_width = max(16, event.size.width - fixed)
        if (shown, error_width) != (self.shown, self.error_width):
            self.shown, self.error_width = shown, error_width
            table = self.query_one(DataTable)
            table.clear(columns=True)
            self._add_columns(table)
            if self.loaded:
                self._show(self.rows, self.ctx.now())

    def load_if_never_loaded(self) -> None:
        # Loaded once the queue is painted (see ListPane.EAGER), then with every refresh.
        if not self.loaded:
            self.reload()

    @work(thread=True, exclusive=True, group="sources")
    def reload(self) -> None:
        rows = queries.list_sources(self.ctx.store)
        self.app.call_from_thread(self._show, rows, self.ctx.now())

    def _show(self, rows: list[dict[str, Any]], now: Any) -> None:
        self.loaded, self.rows = True, rows
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for s in rows:
            bad = s["status"] != "ok" or bool(s["last_error"])  # "new" too: never synced
            cells: dict[str, Cell] = {
                "source": Text(clip(s["name"], self.WIDTHS["source"])),
                "kind": s["kind"],
                "status": Text(s["status"], style="bold red" if bad else "green"),
                "last attempt": clock_time(s["last_sync_at"], now),
                "lag": age(s["last_success_at"], now) if s["last_success_at"] else "never",
                "last error": text(s["last_error"], style="red" if s["last_error"] else ""),
                "base URL": Text(clip(s["base_url"] or "-", self.WIDTHS["base URL"])),
            }
            shown = [cells[k] for k in self.COLUMNS if k in self.shown]
            table.add_row(*shown, height=None)  # the error wraps: as many lines as it takes
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))
