"""The parts of an operation's record as tables: its fields, attempts, receipts, linked
executions (with a link to the tool's own page), holds, the dispatches it turned away, and its
event timeline. The hold detail and the operation detail show the same parts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

from flowledger.domain.display import visible
from flowledger.domain.twins import observed
from flowledger.domain.versions import observed as version_observed
from flowledger.tui.format import execution_url, middle, short_hash, text, when

OPERATION_FIELDS = [
    "operation_id",
    "state",
    "attempt",
    "max_attempts",
    "input_hash",
    "processing_version",
    "approval_version",
    "approval_expires_at",
    "receipt",
    "execution_id",
    "run_index",
    "workflow_id",
    "step",
    "source",
    "input_ref",
    "deadline",
    "version",
    "created_at",
    "updated_at",
]
Links = dict[str, tuple[str, str | None]]
# Why a dispatch was answered hold, in the words of the person on shift.
TURNED_AWAY = {
    "in_flight": "another execution is writing",
    "cancelled": "the operation is cancelled",
    "input_mismatch": "the input differs from the first dispatch",
    "version_mismatch": "the processing version differs",
    "approval_expired": "the approval expired",
    "approval_version_mismatch": "the approval names another version",
    "max_attempts": "no attempts left",
}


def value(key: str, value: Any) -> str | Text:
    if isinstance(value, datetime):
        return when(value) + " UTC"
    if key == "input_hash":
        return short_hash(value)
    return text(value)


def table(title: str, columns: list[str]) -> Table:
    t = Table(title=title, title_justify="left", expand=True, show_edge=False)
    for column in columns:
        t.add_column(column, overflow="fold")
    if columns == ["field", "value"]:  # a record: narrow names, wide values
        t.columns[0].width = 20
        t.columns[1].ratio = 1
    return t


def link(url: str, shown: str | None = None, style: str = "") -> Text:
    """A terminal hyperlink (OSC 8) to ``url``: never wrapped, since a link cut over two lines
    opens half an address; when the space is short the text ends in "…" and the whole
    address is still the target."""
    return Text(
        visible(shown if shown is not None else url),
        style=Style.parse(style) + Style(link=url) if style else Style(link=url),
        no_wrap=True,
        overflow="ellipsis",
    )


def operation_fields(op: dict[str, Any]) -> Table:
    fields = table(escape(visible(f"Operation {op['operation_id']}")), ["field", "value"])
    for key in OPERATION_FIELDS:
        fields.add_row(key, value(key, op.get(key)))
    return fields


def attempts(rows: list[dict[str, Any]]) -> Table:
    t = table("Attempts", ["#", "outcome", "execution", "dispatched", "ended", "error"])
    for a in rows:
        t.add_row(
            str(a["number"]),
            a["outcome"],
            text(a["execution_id"]),
            when(a["dispatched_at"]),
            when(a["ended_at"]),
            text(a["error"]),
        )
    return t


def receipts(rows: list[dict[str, Any]]) -> Table:
    t = table("Receipts", ["receipt", "kind", "attempt", "by", "at", "detail"])
    for r in rows:
        t.add_row(
            text(r["receipt"]),
            r["kind"],
            str(r["attempt"]),
            text(r["confirmed_by"]),
            when(r["confirmed_at"]),
            text(r["detail"]),
        )
    return t


def retries(rows: list[dict[str, Any]]) -> Table | str:
    """The retries asked in n8n with a release (nothing when none was): the execution
    retried and the new one, or why not (yet)."""
    if not rows:
        return ""
    t = table("Retries in n8n", ["hold", "execution", "asked by", "asked", "new execution"])
    for r in rows:
        if r["outcome"] == "retried":
            new = text(r["new_execution_id"])
        elif r["outcome"] == "refused":
            new = Text(f"refused: {r['last_error']}", style="yellow")
        else:
            new = text("waiting" + (f": {r['last_error']}" if r["last_error"] else ""))
        t.add_row(
            str(r["hold_id"]), text(r["execution_id"]), text(r["asked_by"]), when(r["asked_at"]),
            new,
        )  # fmt: skip
    return t


def executions(rows: list[dict[str, Any]], links: Links) -> Table:
    """Executions, with how each is linked to the operation (``linked_via``) when they are an
    operation's (a hold about an execution alone shows that execution without it)."""
    via = any("linked_via" in e for e in rows)
    t = table(
        "Linked executions",
        [
            "source",
            "execution",
            *(["via"] if via else []),
            "status",
            "started",
            "stopped",
            "gone at",
        ],
    )
    urls = []
    for e in rows:
        kind, base = links.get(e["source"], (None, None))
        url = execution_url(kind, base, e)
        t.add_row(
            text(e["source"]),
            link(url, e["external_id"], "underline") if url else text(e["external_id"]),
            *([text(e.get("linked_via"))] if via else []),
            text(e["status"]),
            when(e["started_at"]),
            when(e["stopped_at"]),
            Text(when(e["gone_at"]), style="yellow") if e["gone_at"] else "-",
        )
        if url:
            urls.append(url)
    if not urls:
        return t
    # Each address on a line of its own, across the whole width, so that it is not wrapped.
    whole = Table.grid(expand=True)
    whole.add_column()
    whole.add_row(t)
    for url in urls:
        whole.add_row(link(url, style="dim"))
    return whole


def holds(rows: list[dict[str, Any]]) -> HoldsTable | Text:
    if not rows:
        return Text("Holds: none")
    return HoldsTable(rows)


class HoldsTable:
    """An operation's holds, laid out for the width they are drawn in. Rich folds a word
    that is wider than its column across two lines (``unknown_outcom`` / ``e``); this table
    instead gives every column at least its longest word, times and ids a line of their own,
    and where that does not fit shortens the times, then leaves out the opening time, then
    the owner (a hold's detail shows them)."""

    # The layouts tried, widest first: (times in full, columns left out).
    LAYOUTS: tuple[tuple[bool, tuple[str, ...]], ...] = (
        (True, ()),
        (False, ()),
        (False, ("opened",)),
        (False, ("opened", "owner")),
    )
    WRAPPING = ("reason", "resolution")  # the rest are kept on one line
    NAME_WIDTH = 16  # owners and resolvers: the middle cut out past this

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def table(self, width: int) -> Table:
        for full, left_out in self.LAYOUTS:
            columns = {k: v for k, v in self._columns(full).items() if k not in left_out}
            fitted = self._widths(columns, width)
            if fitted is not None:
                break
        # Narrower than the narrowest layout: that one, as narrow as it gets, words folded.
        widths = fitted or {key: _longest_word(cells) for key, cells in columns.items()}
        t = Table(title="Holds", title_justify="left", show_edge=False)
        for key in columns:
            wraps = key in self.WRAPPING
            t.add_column(
                key, width=widths[key], no_wrap=not wraps, overflow="fold" if wraps else "ellipsis"
            )
        for row in zip(*(cells[1:] for cells in columns.values()), strict=True):
            t.add_row(*row)
        return t

    def _columns(self, full: bool) -> dict[str, list[Text]]:
        """Each column's header and cells as drawn."""
        at = when if full else _month_day

        def resolution(h: dict[str, Any]) -> Text:
            if h["resolved_at"] is None:
                return Text("OPEN", style="bold")
            by = middle(h["resolved_by"] or "-", self.NAME_WIDTH)
            return Text(f"{visible(h['resolution'])} by {by} at {at(h['resolved_at'])}")

        shown = {
            "hold": lambda h: Text(str(h["id"])),
            "reason": lambda h: (
                Text(h["reason"])
                + (Text(" (blocking)", style="bold red") if h["blocking"] else Text())
            ),
            "opened": lambda h: Text(at(h["opened_at"])),
            "deadline": lambda h: Text(at(h["deadline"])),
            "owner": lambda h: Text(middle(h["owner"] or "-", self.NAME_WIDTH)),
            "resolution": resolution,
        }
        return {key: [Text(key), *(cell(h) for h in self.rows)] for key, cell in shown.items()}

    def _widths(self, columns: dict[str, list[Text]], width: int) -> dict[str, int] | None:
        """Each column's width within ``width`` (a cell of padding each side, a line between
        columns), or None when the columns do not fit at their narrowest. The wrapping ones
        get their longest word, then what is left, the reason first, up to their widest
        cell; the last column takes the rest."""
        room = width - 3 * len(columns) + 1
        widths = {
            key: _longest_word(cells) if key in self.WRAPPING else _widest(cells)
            for key, cells in columns.items()
        }
        room -= sum(widths.values())
        if room < 0:
            return None
        for key in self.WRAPPING:
            if key in columns:
                more = min(room, _widest(columns[key]) - widths[key])
                widths[key] += more
                room -= more
        widths[next(reversed(widths))] += room
        return widths


def _widest(cells: list[Text]) -> int:
    return max(cell.cell_len for cell in cells)


def _longest_word(cells: list[Text]) -> int:
    return max(len(word) for cell in cells for word in cell.plain.split() or [""])


def _month_day(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%m-%d %H:%M") if value else "-"


def turned_away(rows: list[dict[str, Any]]) -> Table | Text:
    """The dispatches answered ``hold``: which execution asked, why, and (another execution
    is writing) which one was."""
    if not rows:
        return Text("Dispatches turned away: none (every dispatch was answered go or skip)")
    t = table(
        f"Dispatches turned away ({len(rows)}{'+' if len(rows) >= 100 else ''})",
        ["seq", "at", "asking execution", "reason", "writing execution"],
    )
    for ev in rows:
        data = ev["data"]
        t.add_row(
            str(ev["seq"]),
            when(ev["at"]),
            text(data.get("execution_id")),
            Text(_why(data.get("reason")), style="bold yellow"),
            text(data.get("in_flight")),
        )
    return t


def _why(reason: str | None) -> str:
    if reason is None:
        return "-"
    return f"{visible(reason)}: {TURNED_AWAY.get(reason, 'a blocking hold is open')}"


def twins(events: list[dict[str, Any]]) -> Table:
    """The twin triggers seen on the operation (its ``twin_trigger`` events): two executions
    of one workflow that dispatched it within seconds, and the hold that counts them."""
    return _observations("Twin triggers", "twin_trigger", observed, events)


def stale_versions(events: list[dict[str, Any]]) -> Table:
    """The executions that dispatched the operation while running an outdated version of
    their workflow (its ``stale_workflow_version`` events), and the hold that counts them."""
    return _observations(
        "Outdated workflow versions", "stale_workflow_version", version_observed, events
    )


def _observations(
    title: str, kind: str, said: Callable[[dict[str, Any]], str], events: list[dict[str, Any]]
) -> Table:
    t = table(title, ["at", "what the ledger saw", "hold"])
    for ev in events:
        if ev["kind"] == kind:
            t.add_row(when(ev["at"]), text(said(ev["data"])), text(ev["hold_id"]))
    return t


def timeline(rows: list[dict[str, Any]]) -> Table:
    t = table("Event timeline", ["seq", "at", "actor", "kind", "hold", "data"])
    for ev in rows:
        t.add_row(
            str(ev["seq"]),
            when(ev["at"]),
            text(ev["actor"]),
            ev["kind"],
            text(ev["hold_id"]),
            text(json.dumps(ev["data"], sort_keys=True)),
        )
    return t


def pretty_data(data: Any) -> Text:
    """An event's data in full, indented, outside text made visible line by line."""
    dumped = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return Text("\n".join(visible(line) for line in dumped.splitlines()))
