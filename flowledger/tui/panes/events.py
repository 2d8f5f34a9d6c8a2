"""The event log, newest first, under the chain's verify status."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import Static

from flowledger.storage.reads import chain
from flowledger.storage.reads import event_log as events
from flowledger.tui.context import Context
from flowledger.tui.format import clip, clock_time, middle, short_hash, text
from flowledger.tui.messages import OpenEvent, Report
from flowledger.tui.panes.listing import Cell, ListPane, Searched

# What a person scans an event's data for, first; the rest follows alphabetically. A
# dispatch's deadline or input_ref before its decision pushed the decision off an 80-column row.
DATA_FIRST = ("decision", "reason", "resolution", "outcome", "state", "receipt", "attempt")
_DATA_RANK = {key: n for n, key in enumerate(DATA_FIRST)}


def data_order(data: dict[str, Any]) -> list[str]:
    """The keys of an event's data that have a value, in the order the Events tab shows them."""
    present = [key for key, value in data.items() if value is not None]
    return sorted(present, key=lambda key: (_DATA_RANK.get(key, len(_DATA_RANK)), key))


class EventsPane(ListPane):
    """The event log, newest first, under the chain's verify status (``v`` walks the chain)."""

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

    def __init__(self, ctx: Context, *, id: str) -> None:
        super().__init__(ctx, id=id)
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

    def _page(self, after: dict[str, Any] | None, limit: int) -> events.EventPage:
        # Words are searched a window of the log at a time, newest first, as the queue's are.
        return events.event_page(
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

    def opened(self, row: dict[str, Any]) -> OpenEvent:
        return OpenEvent(row)

    def on_show(self) -> None:
        # Walked once on first look; `v` walks the chain again.
        if self.verified is None and not self.verifying:
            self.verify(announce=False)

    def action_verify(self) -> None:
        self.verify()

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
            said = Report(
                f"Chain OK: {result.checked:,} events, head seq {result.head_seq} "
                f"hash {result.head_hash}"
            )
        else:
            said = Report(
                f"Chain BROKEN at seq {result.bad_seq}: {result.problem} "
                f"({result.checked:,} events good before it)",
                "error",
            )
        self.post_message(said)
