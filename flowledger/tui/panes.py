"""The lists on the main screen: the attention queue, kept executions, sources, and the event
log with the chain's verify status."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from flowledger.domain import is_overdue
from flowledger.domain.display import visible
from flowledger.queries import chain, duty
from flowledger.queries import records as queries
from flowledger.tui.format import age, clip, clock_time, deadline_cell, middle, short_hash, text
from flowledger.tui.listing import Cell, ListPane, Searched

SORT_ORDER = ["deadline", "opened", "reason", "state", "owner", "workflow", "operation"]
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
    """Open holds, soonest deadline first; overdue ones in red."""

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
    FILTER_HINT = "/ filter: words, reason: owner: state: workflow: op: source:, overdue, blocking"
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

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self.sort = "deadline"
        self.descending = False

    def _filter(self) -> duty.HoldFilter:
        return duty.HoldFilter.parse(self.filter_text)

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        # A filter is searched a window of open holds at a time.
        found = duty.search_hold_queue(
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
        return duty.count_hold_queue(self.ctx.store, self.ctx.now(), flt=self._filter())

    def key(self, row: dict[str, Any]) -> str:
        return str(row["id"])

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

    def set_sort(self, sort: str, descending: bool | None = None) -> None:
        if descending is None:
            descending = not self.descending if sort == self.sort else False
        self.sort, self.descending = sort, descending
        self.resume, self.read = None, 0
        self.reload(keep_cursor=True)

    def next_sort(self) -> None:
        self.set_sort(SORT_ORDER[(SORT_ORDER.index(self.sort) + 1) % len(SORT_ORDER)], False)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        sort = HEADER_SORT.get(str(event.column_key.value))
        if sort is not None:
            self.set_sort(sort)


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
        return duty.search_executions(
            self.ctx.store,
            text=self.filter_text,
            after_id=after["id"] if after else None,
            limit=limit,
        )

    def key(self, row: dict[str, Any]) -> str:
        return str(row["id"])

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


# What a person scans an event's data for, first; the rest follows alphabetically. A
# dispatch's deadline or input_ref before its decision pushed the decision off an 80-column row.
DATA_FIRST = ("decision", "reason", "resolution", "outcome", "state", "receipt", "attempt")
_DATA_RANK = {key: n for n, key in enumerate(DATA_FIRST)}


def data_order(data: dict[str, Any]) -> list[str]:
    """The keys of an event's data that have a value, in the order the Events tab shows them."""
    present = [key for key, value in data.items() if value is not None]
    return sorted(present, key=lambda key: (_DATA_RANK.get(key, len(_DATA_RANK)), key))


class EventsPane(ListPane):
    """The event log, newest first, under the chain's verify status."""

    COLUMNS = [
        ("seq", "seq"),
        ("at", "at"),
        ("actor", "actor"),
        ("kind", "kind"),
        ("operation", "operation"),
        ("hold", "hold"),
        ("data", "data"),
    ]
    FILTER_HINT = "/ filter: kind, actor, operation"
    NEWEST_FIRST = True
    # The operation takes what is left, up to its widest, then the data; narrower screens
    # drop the hold, the data and the actor first (enter shows an event in full).
    WIDTHS = {"seq": 7, "at": 11, "actor": 18, "kind": 26, "hold": 5, "data": 16}
    FLEX = ("operation", 20, 44)
    COMFORTABLE = 28
    REST = "data"
    DROP = ("hold", "data", "actor")

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self.head: tuple[int, str] | None = None  # read with the list on screen
        self.verified: chain.VerifyResult | None = None
        self.verifying = False

    def compose(self) -> ComposeResult:
        yield Static("chain: reading…", id="chain-status")
        yield from super().compose()

    def fetch_first(self, limit: int) -> tuple[list[dict[str, Any]], Any]:
        page = self._page(None, limit)
        return Searched(page.rows, page.resume, page.read), (page.head_seq, page.head_hash)

    def fetch(self, after: dict[str, Any] | None, offset: int, limit: int) -> list[dict[str, Any]]:
        page = self._page(after, limit)
        return Searched(page.rows, page.resume, page.read)

    def _page(self, after: dict[str, Any] | None, limit: int) -> duty.EventPage:
        # Words are searched a window of the log at a time, newest first, as the queue's are.
        return duty.event_page(
            self.ctx.store,
            text=self.filter_text,
            before_seq=after["seq"] if after else None,
            limit=limit,
            window=self.window(after),
        )

    def first_page_shown(self, read_with_it: Any) -> None:
        self.head = read_with_it
        self._header()

    def key(self, row: dict[str, Any]) -> str:
        return str(row["seq"])

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        data = ", ".join(f"{k}={row['data'][k]}" for k in data_order(row["data"]))
        kind = row["kind"]
        if kind == "hold_resolved" and row["data"].get("resolution"):
            kind = f"resolved: {row['data']['resolution']}"  # which of the resolutions
        return [
            str(row["seq"]),
            clock_time(row["at"], self.ctx.now()),
            Text(clip(row["actor"], self.widths["actor"])),
            Text(clip(kind, self.widths["kind"])),
            Text(middle(row["operation_id"] or "-", self.widths["operation"])),
            text(row["hold_id"]),
            Text(clip(data, self.widths["data"])),
        ]

    def _header(self) -> None:
        """The head the list was read under, then what the last walk of the chain found."""
        line = Text()
        if self.head is not None:
            seq, digest = self.head
            line.append(f"head seq {seq:,} hash {short_hash(digest)}")
        result = self.verified
        if self.verifying:
            line.append(" · verifying the chain…", style="yellow")
        elif result is None:
            line.append(" · chain not verified yet (v)", style="dim")
        elif not result.ok:
            line.append(
                f" · chain BROKEN at seq {result.bad_seq}: {result.problem}", style="bold red"
            )
        else:
            newer = self.head[0] - result.head_seq if self.head is not None else 0
            line.append(f" · chain OK through seq {result.head_seq:,}", style="green")
            if newer > 0:
                line.append(f", {newer:,} newer not verified yet (v)", style="dim")
        self.query_one("#chain-status", Static).update(line)

    def verify(self, *, announce: bool = True) -> None:
        """Walk the whole chain; ``announce``: say the result in a toast too (``v``)."""
        self.verifying = True
        self._header()
        self._verify(announce)

    @work(thread=True, exclusive=True, group="verify")
    def _verify(self, announce: bool) -> None:
        with self.ctx.store.reader.connect() as conn:
            result = chain.verify(conn)
        self.app.call_from_thread(self._verified, result, announce)

    def _verified(self, result: chain.VerifyResult, announce: bool) -> None:
        self.verified, self.verifying = result, False
        self._header()
        if not announce and result.ok:
            return
        if result.ok:
            self.app.report(
                f"Chain OK: {result.checked:,} events, head seq {result.head_seq} "
                f"hash {result.head_hash}"
            )
        else:
            self.app.report(
                f"Chain BROKEN at seq {result.bad_seq}: {result.problem} "
                f"({result.checked:,} events good before it)",
                "error",
            )


class SourcesPane(Vertical):
    """Each source: last sync attempt, lag since the last success, last error; above them,
    when ``flowledger.toml`` could not be read, why, and that sync is off until it is fixed."""

    COLUMNS = ["source", "kind", "status", "last attempt", "lag", "last error", "base URL"]
    # Every column but the error keeps its width; the error takes what is left and wraps
    # (a row grows a line at a time). Where the error would get fewer than 30 cells the base
    # URL is left out, then the kind.
    WIDTHS = {"source": 16, "kind": 7, "status": 8, "last attempt": 12, "lag": 7, "base URL": 30}
    OPTIONAL = ("base URL", "kind")
    loaded = False

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id)
        self.rows: list[dict[str, Any]] = []
        self.error_width = 40
        self.shown = set(self.COLUMNS)

    def compose(self) -> ComposeResult:
        problem = self.app.ctx.config_error  # type: ignore[attr-defined]
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
                self._show(self.rows, self.app.ctx.now())  # type: ignore[attr-defined]

    def load_if_never_loaded(self) -> None:
        # Loaded once the queue is painted (see ListPane.EAGER), then with every refresh.
        if not self.loaded:
            self.reload()

    @work(thread=True, exclusive=True, group="sources")
    def reload(self) -> None:
        ctx = self.app.ctx  # type: ignore[attr-defined]
        rows = queries.list_sources(ctx.store)
        self.app.call_from_thread(self._show, rows, ctx.now())

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
