"""The handover report: what the next person on duty needs, as Markdown they can read without
the terminal UI. ``flowledger handover`` and the UI's handover key both call :func:`build`,
and :func:`save` to keep it as a file.

It is built from reads only (:mod:`flowledger.storage.reads`) at a given ``now``, so the same
ledger and time give the same text.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowledger.connectors import registry
from flowledger.domain import is_overdue
from flowledger.domain.display import visible
from flowledger.reports import counted_holds
from flowledger.reports.acting import in_n8n
from flowledger.storage.engine import DEFAULT_DB, Store, resolve_url
from flowledger.storage.reads import records
from flowledger.storage.reads import shift as activity
from flowledger.storage.reads.chain import chain_head, ledger_identity
from flowledger.storage.reads.execution_copies import executions_by_ref, source_urls
from flowledger.storage.reads.hold_queue import hold_queue

DEFAULT_SHIFT = timedelta(hours=12)
# Where saved reports go unless told otherwise: a folder of their own beside the default
# database (./var/flowledger.db), never the current directory itself.
DEFAULT_FOLDER = Path("var") / "handover"
SOURCE_LAG_LIMIT = timedelta(hours=1)
UNASSIGNED = "(unassigned)"
_PAGE = 1000
# What Markdown reads as more than text: its escapes, links and images (``[..](..)``,
# ``<url>``), raw HTML, code spans and table cells' ends.
_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\[]<>`|"})


@dataclass(frozen=True)
class Shift:
    since: datetime
    until: datetime
    operator: str | None = None


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else "-"


def span(delta: timedelta) -> str:
    """A short, human duration: ``3d 4h``, ``2h 05m``, ``12m``."""
    seconds = int(abs(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m"


def _cell(value: Any) -> str:
    """Outside text as one line of literal Markdown: runs of white space (line breaks too)
    become one space, other control and bidi characters visible escapes, and nothing in it reads
    as a link, HTML, code or a table cell's end."""
    text = "-" if value is None or value == "" else str(value)
    return visible(" ".join(text.split())).translate(_MARKDOWN)


def _link(shown: Any, url: str | None) -> str:
    """``shown`` as a Markdown link to ``url`` (the tool's page), or as text when there is
    none or it holds what would end the link early."""
    if not url or any(c.isspace() or c in "<>" for c in url):
        return _cell(shown)
    return f"[{_cell(shown)}](<{url}>)"


def _more(rows: list[Any]) -> str:
    return f" (the first {len(rows)})" if len(rows) >= activity.LIMIT else ""


def _open_holds(store: Store, now: datetime) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while True:
        page = hold_queue(store, now, limit=_PAGE, after=rows[-1] if rows else None)
        rows.extend(page)
        if len(page) < _PAGE:
            return rows


def _resolved(store: Store, shift: Shift) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while True:
        after = rows[-1]["id"] if rows else 0
        page = activity.resolved_holds(store, shift.since, shift.until, after_id=after, limit=_PAGE)
        rows.extend(page)
        if len(page) < _PAGE:
            return sorted(rows, key=lambda r: (r["resolved_at"], r["id"]))


def execution_links(store: Store, held: list[dict[str, Any]]) -> dict[str, str]:
    """The tool's page of each execution the rows name (``execution_id`` with ``source``),
    where the ledger keeps a copy of it and its source's kind has pages."""
    refs = sorted({h["execution_id"] for h in held if h.get("execution_id")})
    if not refs:
        return {}
    urls = source_urls(store)
    links: dict[str, str] = {}
    for copy in executions_by_ref(store, refs):
        kind, base = urls.get(copy["source"], (None, None))
        url = registry.execution_url(kind, base, copy.get("workflow_id"), copy["external_id"])
        if url is not None:
            links.setdefault(copy["external_id"], url)
    return links


def sources_in_trouble(store: Store, now: datetime) -> list[tuple[dict[str, Any], str]]:
    """Sources whose last sync failed, or that have not synced successfully for a while."""
    trouble = []
    for src in records.list_sources(store):
        problems = []
        if src["status"] not in ("ok", "new"):  # "new": said below as never synced
            problems.append(f"status {src['status']}")
        if src["last_error"]:
            problems.append(f"last error at {when(src['last_error_at'])}: {src['last_error']}")
        last_ok = src["last_success_at"]
        if last_ok is None:
            problems.append("never synced successfully")
        elif now - last_ok > SOURCE_LAG_LIMIT:
            problems.append(f"last successful sync {span(now - last_ok)} ago")
        if problems:
            trouble.append((src, "; ".join(problems)))
    return trouble


def verify_command(store: Store, head_hash: str) -> str:
    """The command that checks this ledger against ``head_hash``, as it can be run anywhere:
    with ``--db`` unless the ledger is the default one (the password of a URL left out)."""
    command = f"flowledger verify --expect-head {head_hash}"
    if store.url.render_as_string() == resolve_url(DEFAULT_DB).render_as_string():
        return command
    where = (
        store.url.database
        if store.dialect == "sqlite" and store.url.database
        else store.url.set(drivername="postgresql", password=None).render_as_string(False)
    )
    return f"flowledger verify --db {shlex.quote(str(where))} --expect-head {head_hash}"


def build(store: Store, shift: Shift, *, now: datetime | None = None) -> str:
    """The report as Markdown."""
    now = now or shift.until
    holds = _open_holds(store, now)
    resolved = _resolved(store, shift)
    trouble = sources_in_trouble(store, now)
    done = activity.activity(store, shift.since, shift.until)
    links = execution_links(store, [*holds, *done.opened])
    seq, head_hash = chain_head(store)
    ledger_id = ledger_identity(store)
    overdue = sum(1 for h in holds if is_overdue(h["deadline"], now))
    blocking = sum(1 for h in holds if h["blocking"])

    out: list[str] = ["# Handover report", ""]
    if records.is_demo(store):
        out += ["> **Demo ledger: every record here is made-up sample data.**", ""]
    out += [
        f"- Shift: {when(shift.since)} to {when(shift.until)}",
        f"- Written at: {when(now)}" + (f" by {_cell(shift.operator)}" if shift.operator else ""),
        f"- Open holds: {len(holds)} ({blocking} blocking, {overdue} overdue)",
        f"- Opened during the shift: {len(done.opened)}{_more(done.opened)}",
        f"- Extended or reassigned during the shift: {len(done.changes)}{_more(done.changes)}",
        f"- Resolved during the shift: {len(resolved)}",
        f"- Dispatching with no hold yet: {len(done.in_flight)}{_more(done.in_flight)}",
        f"- Undelivered alerts: {done.alerts_waiting}",
        f"- Sources in trouble: {len(trouble)}",
        f"- Ledger: `{ledger_id}`",
        f"- Event chain head: seq {seq}, hash `{head_hash}`",
        "",
        "## Open holds by owner",
        "",
    ]
    if not holds:
        out += ["No open holds.", ""]
    by_owner: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for h in holds:
        by_owner[h["owner"] or UNASSIGNED].append(h)
    for owner in sorted(by_owner, key=lambda o: (o != UNASSIGNED, o)):
        items = by_owner[owner]
        late = sum(1 for h in items if is_overdue(h["deadline"], now))
        out += [f"### {_cell(owner)} — {len(items)} open, {late} overdue", ""]
        out += [
            "| deadline | hold | reason | operation | state | execution | next action |",
            "|---|---|---|---|---|---|---|",
        ]
        for h in items:
            due = when(h["deadline"])
            if is_overdue(h["deadline"], now):
                due = f"**OVERDUE {span(now - h['deadline'])}** ({due})"
            reason = h["reason"] + (" (blocking)" if h["blocking"] else "")
            out.append(
                f"| {due} | {h['id']} | {reason} | {_cell(h['operation_id'] or h['source'])} "
                f"| {_cell(h['operation_state'])} | {_execution(h, links)} "
                f"| {_cell(h['next_action'])} |"
            )
        out.append("")
    out += _opened(done.opened, links)
    out += _changes(done.changes)

    out += ["## Resolved during the shift", ""]
    if not resolved:
        out += ["Nothing was resolved during the shift.", ""]
    else:
        people = Counter(r["resolved_by"] for r in resolved)
        out += [
            "By whom: " + ", ".join(f"{_cell(who)} {n}" for who, n in sorted(people.items())) + ".",
            "",
            "| resolved at | hold | reason | operation | resolution | receipt | by | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        receipts = activity.receipts(store, resolved)
        for r in resolved:
            out.append(
                f"| {when(r['resolved_at'])} | {r['id']} | {r['reason']} "
                f"| {_cell(r['operation_id'] or r['source'])} | {_cell(r['resolution'])} "
                f"| {_cell(receipts.get(r['id']))} "
                f"| {_cell(r['resolved_by'])} | {_cell(r['resolution_note'])} |"
            )
        out.append("")
    out += _in_flight(done.in_flight, now)
    out += counted_holds.sections(store, _PAGE, _cell)
    out += _alerts(done)
    out += in_n8n(store, shift.since, _cell, when)

    out += ["## Sources in trouble", ""]
    if not trouble:
        out += ["All sources synced recently without errors.", ""]
    for src, problem in trouble:
        out.append(f"- **{_cell(src['name'])}** ({_cell(src['kind'])}): {_cell(problem)}")
    if trouble:
        out.append("")
    out += [
        "## Event chain",
        "",
        f"Head at seq {seq}: `{head_hash}`. Keep this hash: "
        f"`{verify_command(store, head_hash)}` later proves nothing was removed "
        "or rewritten since.",
        "",
    ]
    return "\n".join(out)


def _execution(h: dict[str, Any], links: dict[str, str]) -> str:
    """The execution a hold concerns, linked to the tool's page (an ``execution_stuck``
    hold names the one that is stuck), with its status when the ledger keeps a copy."""
    ref = h.get("execution_id")
    if not ref:
        return "-"
    status = f" ({_cell(h['execution_status'])})" if h.get("execution_status") else ""
    return _link(ref, links.get(ref)) + status


def _opened(opened: list[dict[str, Any]], links: dict[str, str]) -> list[str]:
    out = ["## Opened during the shift", ""]
    if not opened:
        return [*out, "No hold was opened during the shift.", ""]
    out += [
        f"{len(opened)} opened{_more(opened)}; those still open are listed above too.",
        "",
        "| opened at | hold | reason | operation | execution | now |",
        "|---|---|---|---|---|---|",
    ]
    for h in opened:
        now = "open" if h["resolved_at"] is None else f"resolved: {h['resolution']}"
        reason = h["reason"] + (" (blocking)" if h["blocking"] else "")
        out.append(
            f"| {when(h['opened_at'])} | {h['id']} | {reason} "
            f"| {_cell(h['operation_id'] or h['source'])} | {_execution(h, links)} "
            f"| {_cell(now)} |"
        )
    return [*out, ""]


def _changes(changes: list[dict[str, Any]]) -> list[str]:
    out = ["## Extended and reassigned during the shift", ""]
    if not changes:
        return [*out, "No hold was extended or reassigned during the shift.", ""]
    out += ["| at | hold | operation | change | by | note |", "|---|---|---|---|---|---|"]
    for ev in changes:
        data = ev["data"]
        change = (
            f"assigned to {data.get('owner')}"
            if ev["kind"] == "hold_assigned"
            else f"deadline to {data.get('deadline')}"
        )
        out.append(
            f"| {when(ev['at'])} | {ev['hold_id']} | {_cell(ev['operation_id'])} "
            f"| {_cell(change)} | {_cell(ev['actor'])} | {_cell(data.get('note'))} |"
        )
    return [*out, ""]


def _in_flight(ops: list[dict[str, Any]], now: datetime) -> list[str]:
    out = ["## Dispatching with no hold yet", ""]
    if not ops:
        return [*out, "No operation is waiting for its outcome.", ""]
    out += [
        "Each waits for its workflow's confirm or fail; when its deadline passes the sweep "
        "holds it as a blocking unknown_outcome.",
        "",
        "| deadline | operation | attempt | execution | workflow |",
        "|---|---|---|---|---|",
    ]
    for op in ops:
        due = op["deadline"]
        at = "-" if due is None else f"{when(due)} ({'passed' if due <= now else 'in'} "
        if due is not None:
            at += f"{span(due - now)})" if due > now else f"{span(now - due)} ago)"
        out.append(
            f"| {at} | {_cell(op['operation_id'])} | {op['attempt']}/{op['max_attempts']} "
            f"| {_cell(op['execution_id'])} | {_cell(op['workflow_id'])} |"
        )
    return [*out, ""]


def _alerts(done: activity.Activity) -> list[str]:
    out = ["## Undelivered alerts", ""]
    if not done.alerts_waiting:
        return [*out, "No alert is waiting to be delivered.", ""]
    out += [
        f"{done.alerts_waiting} not delivered yet{_more(done.alerts)}, oldest first; "
        "`flowledger run` keeps retrying them.",
        "",
        "| written at | hold | reason | receiver | attempts | next try | last error |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in done.alerts:
        out.append(
            f"| {when(a['created_at'])} | {_cell(a['hold_id'])} | {_cell(a['reason'])} "
            f"| {_cell(a['receiver'])} | {a['attempts']} | {when(a['next_attempt_at'])} "
            f"| {_cell(a['last_error'])} |"
        )
    return [*out, ""]


def save(text: str, folder: Path, now: datetime) -> Path:
    """Keep ``text`` as a new file in ``folder`` and return its path. The name is
    ``handover-YYYYMMDD-HHMMSS.md`` after ``now`` in UTC, with ``-2``, ``-3``, … when that name
    is taken; each name is tried with ``O_EXCL``, so no report ever overwrites another, not
    even one written in the same second by another process. The folder (when made here) and
    the file are their owner's alone, as the ledger's own files are: the report names
    operations, people and hashes."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stem = f"handover-{now.astimezone(UTC):%Y%m%d-%H%M%S}"
    for n in itertools.count(1):
        path = folder / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        return path
    raise AssertionError("unreachable: itertools.count never ends")
