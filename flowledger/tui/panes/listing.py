"""A paged, filtered, live list: the shape shared by the queue, executions and events.

Rows come from the database a page at a time in a thread worker; scrolling near the end loads
the next page; a refresh re-reads as many rows as are loaded and puts the cursor back on the
same row (by key), so neither the cursor nor the filter is lost. A search that reads a
window of rows at a time (:class:`Searched`) goes on by itself until the page is full or the
rows end, each window painted as it comes.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from flowledger.storage.reads import hold_queue as holds
from flowledger.tui.context import Context
from flowledger.tui.messages import ListShown
from flowledger.tui.panes.columns import Cell, Columns
from flowledger.tui.tabs import Pane


class Searched(list[dict[str, Any]]):
    """Rows from a search that read a window and stopped before it filled the page:
    ``resume`` is where the next window starts (``None``: the rows ended, or the page is
    full), ``read`` how many rows the window covered."""

    def __init__(self, rows: list[dict[str, Any]], resume: dict[str, Any] | None, read: int):
        super().__init__(rows)
        self.resume = resume
        self.read = read


class ListPane(Columns, Pane):
    """Subclasses name their columns and say how to fetch a page and draw a row, and what
    picking a row opens (:meth:`opened`)."""

    BINDINGS = [Binding("escape", "leave_filter", "Back to list", show=False)]
    FILTER_HINT = "/ filter"
    # Whether the pane loads as soon as it is mounted; the others wait until the first screen
    # is painted (MainScreen starts them), so the first paint shares the CPU with nothing.
    EAGER = False
    # A list of the newest first: a cursor on its first row stays on the first row when newer
    # rows arrive (as `tail -f` follows), instead of following its old row down out of sight.
    NEWEST_FIRST = False

    def __init__(self, ctx: Context, *, id: str) -> None:
        super().__init__(id=id)
        self.ctx = ctx
        self.rows: list[dict[str, Any]] = []
        self._cells: list[list[Cell]] = []  # the table's rows as drawn
        self.filter_text = ""
        self.total: int | None = None
        self.exhausted = False
        # A windowed search (see Searched): where it goes on, how many rows its windows
        # covered, and how many rows the list is being filled up to.
        self.resume: dict[str, Any] | None = None
        self.read = 0
        self.wanted = 0
        self._asked: tuple[int, int] | None = None  # the next rows asked for and not yet in
        self.generation = 0  # the newest load asked for
        self.shown = -1  # the load whose rows are on screen
        self.shown_keys = [key for key, _ in self.COLUMNS]
        self.widths = self.widest()
        self.needed = {}

    # -- subclass hooks -------------------------------------------------------------

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def count(self) -> int | None:
        return None

    def window(self, after: Any) -> int:
        """How many rows a windowed search reads next: as many as it has read before (so
        what it has read doubles each call), within ``SEARCH_WINDOW`` and
        ``SEARCH_WINDOW_MAX``; a first page after a refresh (no ``after``) covers all that."""
        window = max(holds.SEARCH_WINDOW, min(self.read, holds.SEARCH_WINDOW_MAX))
        return window if after is not None else max(window, self.read)

    def fetch_first(self, limit: int) -> tuple[list[dict[str, Any]], Any]:
        """The first page, and whatever was read with it for :meth:`first_page_shown`."""
        return self.fetch(None, 0, limit), None

    def first_page_shown(self, read_with_it: Any) -> None:
        """The first page is on screen (the pane's header, if any, follows it here)."""

    def key(self, row: dict[str, Any]) -> str:
        raise NotImplementedError

    def opened(self, row: dict[str, Any]) -> Message:
        """What picking ``row`` (enter, a click) asks the app to open."""
        raise NotImplementedError

    # -- layout ----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Input(placeholder=self.FILTER_HINT, classes="filter")
        table: DataTable[Cell] = DataTable(cursor_type="row", zebra_stripes=True)
        self._add_columns(table)
        yield table
        yield Static("loading…", classes="list-status")

    def _add_columns(self, table: DataTable[Cell]) -> None:
        for key, label in self.COLUMNS:
            if key in self.shown_keys:
                table.add_column(label, key=key, width=self.widths.get(key))

    def on_resize(self, event: events.Resize) -> None:
        self.refit(event.size.width)

    def on_show(self) -> None:
        # A pane on a tab not yet shown has had no size to fit: fit it when it first shows.
        if self.size.width:
            self.refit(self.size.width)

    def _fit_columns(self, width: int) -> bool:
        """Lay the columns out anew for ``width`` when that changes them (the table is then
        empty); whether it did."""
        if not width:
            return False
        visible, widths = self.fit(width)
        if (visible, widths) == (self.shown_keys, self.widths):
            return False
        self.shown_keys, self.widths = visible, widths
        self.table.clear(columns=True)
        self._add_columns(self.table)
        return True

    def refit(self, width: int) -> None:
        cursor = self.table.cursor_row
        if self._fit_columns(width):
            self._redraw(cursor)

    def _redraw(self, cursor: int) -> None:
        """Every row loaded, drawn anew in an emptied table; the cursor back on ``cursor``."""
        self._cells = [self.shown_cells(r) for r in self.rows]
        self.table.add_rows(self._cells)
        if self.rows:
            self.table.move_cursor(row=min(cursor, len(self.rows) - 1))

    def shown_cells(self, row: dict[str, Any]) -> list[Cell]:
        """The cells of the columns shown."""
        cells = self.cells(row)
        if len(self.shown_keys) == len(self.COLUMNS):
            return cells
        keys = [key for key, _ in self.COLUMNS]
        return [c for key, c in zip(keys, cells, strict=True) if key in self.shown_keys]

    @property
    def table(self) -> DataTable[Cell]:
        return self.query_one(DataTable)

    def on_mount(self) -> None:
        if self.EAGER:
            self.reload()

    def load_if_never_loaded(self) -> None:
        if self.generation == 0:
            self.reload()

    def action_filter(self) -> None:
        self.query_one(Input).focus()

    def action_leave_filter(self) -> None:
        self.table.focus()

    @on(Input.Changed, ".filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.rows, self.total = [], None
        self.resume, self.read = None, 0
        self.reload(keep_cursor=False)

    @on(Input.Submitted, ".filter")
    def _filter_submitted(self) -> None:
        self.table.focus()

    @on(DataTable.RowSelected)
    def _picked(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.current()
        if row is not None:
            self.post_message(self.opened(row))

    @on(DataTable.RowHighlighted)
    def _near_end(self, event: DataTable.RowHighlighted) -> None:
        if not self.exhausted and event.cursor_row >= len(self.rows) - 5:
            self.load_more()

    def current(self) -> dict[str, Any] | None:
        if not self.rows or self.table.row_count == 0:
            return None
        index = self.table.cursor_row
        return self.rows[index] if 0 <= index < len(self.rows) else None

    # -- loading ---------------------------------------------------------------------

    def reload(self, keep_cursor: bool = True) -> None:
        self.generation += 1
        limit = max(self.ctx.page_size, len(self.rows))
        self.wanted = limit
        self._load(self.generation, limit, keep_cursor)

    @work(thread=True, exclusive=True, group="list-load")
    def _load(self, generation: int, limit: int, keep_cursor: bool) -> None:
        rows, read_with_it = self.fetch_first(limit)
        self.app.call_from_thread(self._show, generation, rows, limit, keep_cursor, read_with_it)

    def _start_count(self, generation: int) -> None:
        if generation == self.generation:
            self._count(generation)

    @work(thread=True, exclusive=True, group="list-count")
    def _count(self, generation: int) -> None:
        total = self.count()
        if total is not None:
            self.app.call_from_thread(self._counted, generation, total)

    def _counted(self, generation: int, total: int) -> None:
        if generation == self.generation:
            self.total = total
            self._status()

    def load_more(self) -> None:
        self.wanted = max(self.wanted, len(self.rows) + self.ctx.page_size)
        self._go_on()

    def _go_on(self) -> None:
        """The next rows: after where a windowed search stopped, else after the last row."""
        after = self.resume if self.resume is not None else (self.rows[-1] if self.rows else None)
        asked = (self.generation, len(self.rows))
        if after is not None and asked != self._asked:  # not twice for the same rows
            self._asked = asked
            self._load_more(self.generation, after, len(self.rows))

    def _searched(self, rows: list[dict[str, Any]], batch: int, first: bool) -> None:
        """Keep where a windowed search stands after ``rows`` came in (a batch of at most
        ``batch`` rows); once the rows have ended, their number is the total."""
        self.resume = getattr(rows, "resume", None)
        read = getattr(rows, "read", 0)
        self.read = read if first else self.read + read
        self.exhausted = self.resume is None and len(rows) < batch
        if self.exhausted:
            self.total = len(self.rows)

    @work(thread=True, exclusive=True, group="list-more")
    def _load_more(self, generation: int, last: dict[str, Any], offset: int) -> None:
        rows = self.fetch(last, offset, self.ctx.page_size)
        self.app.call_from_thread(self._append, generation, offset, rows)

    def _show(
        self,
        generation: int,
        rows: list[dict[str, Any]],
        limit: int,
        keep_cursor: bool,
        read_with_it: Any = None,
    ) -> None:
        if generation != self.generation:
            return  # a newer filter or refresh is on its way
        first = self.shown == -1
        self.shown = generation
        table = self.table
        selected = self.current() if keep_cursor else None
        index = table.cursor_row
        if self.NEWEST_FIRST and index == 0:
            selected = None  # stay on top, where the new rows come in
        self.measure(rows, anew=True)
        laid_out = self._fit_columns(self.size.width)  # the columns follow what the rows need
        cells = [self.shown_cells(r) for r in rows]
        unchanged = (
            not laid_out
            and [self.key(r) for r in rows] == [self.key(r) for r in self.rows]
            and [_drawn(row) for row in cells] == [_drawn(row) for row in self._cells]
        )
        self.rows, self._cells = rows, cells
        self._searched(rows, limit, first=True)
        if not unchanged:
            # Clearing and refilling makes the table draw every visible cell anew: a refresh
            # that changed nothing on screen leaves it alone.
            table.clear()
            table.add_rows(cells)
        if rows:
            if selected is not None:
                keys = [self.key(r) for r in rows]
                wanted = self.key(selected)
                index = keys.index(wanted) if wanted in keys else min(index, len(rows) - 1)
            table.move_cursor(row=max(0, min(index, len(rows) - 1)) if keep_cursor else 0)
        self._status()
        self.first_page_shown(read_with_it)
        if first:
            self.post_message(ListShown(self))
        # After the rows are painted: the count only adds "of N", and a count running beside
        # the paint would slow it. A search that stopped at the end of its window goes on.
        self.call_after_refresh(self._start_count, generation)
        self._search_on()

    def _search_on(self) -> None:
        if self.resume is not None and len(self.rows) < self.wanted:
            self.call_after_refresh(self._go_on)

    def _append(self, generation: int, offset: int, rows: list[dict[str, Any]]) -> None:
        if self._asked == (generation, offset):
            self._asked = None
        if generation != self.generation or offset != len(self.rows):
            return
        self.rows.extend(rows)
        self._searched(rows, self.ctx.page_size, first=False)
        self.measure(rows)
        cursor = self.table.cursor_row
        if self._fit_columns(self.size.width):
            self._redraw(cursor)
        else:
            cells = [self.shown_cells(r) for r in rows]
            self._cells.extend(cells)
            self.table.add_rows(cells)
        self._status()
        self._search_on()

    def _status(self) -> None:
        shown = len(self.rows)
        of = f" of {self.total:,}" if self.total is not None else ("" if self.exhausted else "+")
        flt = f"  filter: {self.filter_text}" if self.filter_text else ""
        searching = f"  searching… {self.read:,} read" if self.resume is not None else ""
        line = f"{shown:,}{of} rows{flt}{searching}{self.status_suffix()}"
        if not self.rows and self.exhausted and self.nothing_listed():
            line = f"{self.nothing_listed()}{flt}"
        self.query_one(".list-status", Static).update(line, layout=False)  # one line, always

    def status_suffix(self) -> str:
        return ""

    def nothing_listed(self) -> str:
        """What the status line says when there are no rows at all (empty: the count)."""
        return ""


def _drawn(cells: list[Cell]) -> list[Any]:
    """What a row's cells draw: their text, style and styled spans (a Text's own ``==``
    leaves its style out)."""
    return [(c.plain, str(c.style), tuple(c.spans)) if isinstance(c, Text) else c for c in cells]
