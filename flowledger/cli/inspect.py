"""Looking at a ledger: ``status``, ``show``, ``verify``, ``export``."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowledger.cli import as_json as as_json_doc
from flowledger.cli import observed
from flowledger.cli.common import (
    FAILED,
    NOT_FOUND,
    Command,
    DbOption,
    JsonOption,
    app,
    die,
    echo_json,
    json_default,
    one_line_errors,
    one_of,
    opened,
    parse_since,
)
from flowledger.cli.tables import echo_table, printable, when
from flowledger.domain.chain import event_time, head_prefix
from flowledger.domain.display import counted
from flowledger.domain.times import for_machines
from flowledger.plumbing.clock import utcnow

if TYPE_CHECKING:
    from flowledger.storage.reads import chain
    from flowledger.storage.reads.anchor_check import AnchorCheck
    from flowledger.storage.reads.replay import DeepResult

# What ``show`` lists of an operation, in this order, when set.
FIELDS = (
    "state",
    "attempt",
    "max_attempts",
    "input_hash",
    "processing_version",
    "receipt",
    "execution_id",
    "workflow_id",
    "step",
    "source",
    "input_ref",
    "approval_version",
)
TIMES = ("deadline", "approval_expires_at", "created_at", "updated_at")


@app.command()
@one_line_errors
def status(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Operations by state and open holds by reason."""
    from flowledger.storage.reads import records

    now = utcnow()
    with opened(db) as store:
        st = records.status(store, now)
    if as_json:
        echo_json(as_json_doc.status(st, now))
        return
    if st.restored_from is not None:
        from flowledger.services.restores import warning

        typer.echo(warning(st.restored_from))
    if st.witness_refusals:
        from flowledger.services.witnessing import alarm

        for refusal in st.witness_refusals:
            typer.echo(alarm(refusal))
    typer.echo("operations:")
    states = ("prepared", "dispatching", "confirmed", "failed", "cancelled")
    echo_table([(state, st.by_state.get(state, 0)) for state in states], indent=2, right={1})
    typer.echo(
        f"open holds: {sum(st.open_holds.values())} "
        f"(blocking {st.blocking_open}, overdue {st.overdue})"
    )
    echo_table(sorted(st.open_holds.items()), indent=2, right={1})
    if st.twin_triggers:
        # A workflow tool starting a workflow twice for one call: the duplicate_trigger holds.
        typer.echo(f"twin triggers counted: {sum(st.twin_triggers.values())}")
    typer.echo(f"events: {st.events}  head: {st.head_hash}")
    typer.echo(f"ledger: {st.ledger_id}")


@app.command(cls=Command)
@one_line_errors
def show(
    operation_id: Annotated[
        str,
        typer.Argument(metavar="OPERATION_ID", help="The operation's id, as the workflow sent it"),
    ],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """One operation: its record, attempts, receipts, holds, linked executions and event
    timeline."""
    from flowledger.storage.reads import records

    with opened(db) as store:
        detail = records.operation_detail(store, operation_id)
    if detail is None:
        die(f"no operation {operation_id!r}", NOT_FOUND)
    assert detail is not None
    if as_json:
        echo_json(detail.__dict__)
        return
    op = detail.operation
    typer.echo(f"operation  {printable(op['operation_id'])}")
    # The deadline is the current attempt's, to confirm by: once it is no longer dispatching,
    # it is past business.
    times = [k for k in TIMES if k != "deadline" or op["state"] == "dispatching"]
    echo_table(
        [(key, op[key]) for key in FIELDS if op.get(key) is not None]
        + [(key, when(op[key])) for key in times if op.get(key) is not None],
        indent=2,
    )
    _section(
        "attempts",
        [
            (
                f"#{a['number']}",
                a["outcome"],
                f"execution {a['execution_id']}",
                f"at {when(a['dispatched_at'])}",
                a["error"] or "",
            )
            for a in detail.attempts
        ],
    )
    _section(
        "receipts",
        [
            (
                r["receipt"],
                r["kind"],
                f"attempt {r['attempt']}",
                f"by {r['confirmed_by']}",
                f"at {when(r['confirmed_at'])}",
            )
            for r in detail.receipts
        ],
    )
    _section(
        "holds",
        [
            (
                f"[{h['id']}]",
                f"{h['reason']}{' (blocking)' if h['blocking'] else ''}",
                (
                    f"resolved {h['resolution']} by {h['resolved_by']}"
                    if h["resolved_at"]
                    else f"OPEN, due {when(h['deadline'])}"
                ),
                h["detail"],
            )
            for h in detail.holds
        ],
    )
    for title, kind, said in observed.SECTIONS:
        _section(title, observed.rows(detail.events, kind, said))
    _section(
        "executions",
        [
            (
                f"{e['source']}/{e['external_id']}",
                e["status"],
                f"via {e['linked_via']}",
                f"gone {when(e['gone_at'])}" if e["gone_at"] else "",
            )
            for e in detail.executions
        ],
    )
    if detail.retries:  # asked in the workflow tool with a release: shown when there are any
        _section(
            "retries",
            [
                (
                    f"hold [{r['hold_id']}]",
                    f"execution {r['execution_id']}",
                    f"asked by {r['asked_by']}",
                    _retried(r),
                )
                for r in detail.retries
            ],
        )
    _section(
        "events",
        [
            (
                ev["seq"],
                when(ev["at"]),
                ev["kind"],
                ev["actor"],
                json.dumps(ev["data"], sort_keys=True),
            )
            for ev in detail.events
        ],
        right={0},
    )


def _retried(r: dict[str, Any]) -> str:
    if r["outcome"] == "retried":
        return f"-> execution {r['new_execution_id']} ({when(r['done_at'])})"
    if r["outcome"] == "refused":
        return f"refused: {r['last_error']}"
    return "waiting" + (f": {r['last_error']}" if r["last_error"] else "")


def _section(title: str, rows: list[tuple[object, ...]], right: Collection[int] = ()) -> None:
    """One part of ``show``: its title, then its rows, or ``(none)``."""
    typer.echo(f"{title}:")
    if rows:
        echo_table(rows, indent=2, right=right)
    else:
        typer.echo("  (none)")


def _head_prefix(value: str | None) -> str | None:
    try:
        return None if value is None else head_prefix(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command()
@one_line_errors
def verify(
    db: DbOption = None,
    expect_head: Annotated[
        str | None,
        typer.Option(
            metavar="HASH",
            callback=_head_prefix,
            help="A head hash printed earlier (by verify, the handover report or the UI), whole "
            "or its first 12 or more hex digits; it must be the hash of an event of the chain "
            "(the head, or an earlier one), so events removed or rewritten up to it are caught",
        ),
    ] = None,
    anchors: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A file of heads published by `flowledger run` ([anchors] file); catches a "
            "chain rewritten or cut after any of them",
        ),
    ] = None,
    deep: Annotated[
        bool,
        typer.Option(
            "--deep",
            help="Also replay the events and compare operations, attempts, receipts and holds "
            "with them (reads the whole ledger)",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the result of each check as one JSON object"),
    ] = False,
) -> None:
    """Walk the whole event chain; exit 1 naming the first bad sequence number (and, with
    --anchors or --deep, every published head or table row that disagrees)."""
    from flowledger.storage.reads import chain
    from flowledger.storage.reads.anchor_check import check_anchors
    from flowledger.storage.reads.replay import deep_verify

    with opened(db) as store, chain.snapshot(store) as conn:
        result = chain.verify(conn, expect_head=expect_head)
        if not as_json:
            _report_chain(result)
        published = check_anchors(conn, anchors) if anchors is not None else None
        if published is not None and not as_json:
            _report_anchors(published)
        replayed = deep_verify(conn) if deep else None
        if replayed is not None and not as_json:
            _report_deep(replayed)
    answer = as_json_doc.verify(result, published, replayed)
    if as_json:
        echo_json(answer)
    if not answer["ok"]:
        raise typer.Exit(FAILED)


def _report_chain(result: chain.VerifyResult) -> None:
    if not result.tree_ok:
        typer.echo(f"tree MISMATCH: {result.problem}; the events themselves chain correctly")
    elif not result.ok and result.bad_seq is None:
        events = (
            "the 1 event itself chains"
            if result.checked == 1
            else f"the {result.checked} events themselves chain"
        )
        typer.echo(
            f"head MISMATCH: {result.problem}; {events} correctly up to seq {result.head_seq}"
        )
    elif not result.ok:
        typer.echo(
            f"chain BROKEN at seq {result.bad_seq}: {result.problem} "
            f"({counted(result.checked, 'event')} good before it)"
        )
    else:
        typer.echo(
            f"chain ok: {counted(result.checked, 'event')}, head seq {result.head_seq} "
            f"hash {result.head_hash}"
        )
    if result.ok and result.expected_seq is not None:
        since = result.head_seq - result.expected_seq
        which = (
            f"the hash of event {result.expected_seq}"
            if result.expected_seq
            else "the head of the empty ledger"
        )
        typer.echo(
            "expected head ok: it is the head"
            if since == 0
            else f"expected head ok: it is {which}, {counted(since, 'event')} appended since"
        )


def _report_anchors(found: AnchorCheck) -> None:
    for problem in found.problems:
        typer.echo(f"anchor MISMATCH: {printable(problem)}")
    if found.ok:
        typer.echo(f"anchors ok: {counted(found.checked, 'published head')} found in the chain")
    else:
        typer.echo(
            f"anchors: {len(found.problems)} of {counted(found.checked, 'published head')} "
            + ("disagrees" if len(found.problems) == 1 else "disagree")
        )


def _shown(value: Any) -> str:
    """A compared value: a time in ISO 8601 (to the microsecond a difference may be in),
    anything else as Python writes it (strings quoted, so that ``'None'`` and ``None``
    differ), escaped for the terminal."""
    return printable(for_machines(value) if isinstance(value, datetime) else repr(value))


def _report_deep(found: DeepResult) -> None:
    """Print the replay's findings, one a line."""
    for f in found.findings:
        if f.column is None:
            typer.echo(f"table MISMATCH: {printable(f.what)}: {printable(f.note)}")
        else:
            typer.echo(
                f"table MISMATCH: {printable(f.what)}: {f.column} is "
                f"{_shown(f.stored)}, the events say {_shown(f.expected)}"
            )
    if found.more:
        typer.echo(f"... and {counted(found.more, 'more difference')}")
    summary = (
        f"{counted(found.events, 'event')} replayed against "
        f"{counted(found.operations, 'operation')}, {counted(found.holds, 'hold')} and "
        f"{counted(found.tokens, 'token')}"
    )
    if found.ok:
        typer.echo(f"tables ok: {summary}")
    else:
        typer.echo(f"tables: {counted(len(found.findings) + found.more, 'difference')} ({summary})")


@app.command()
@one_line_errors
def export(
    db: DbOption = None,
    format: Annotated[
        str, typer.Option("--format", metavar="FORMAT", help="Output format")
    ] = "jsonl",
    since: Annotated[
        str | None,
        typer.Option(
            metavar="TIME",
            help="Only events at or after this time: -2h or 2h (two hours ago), 8am (the "
            "last one), yesterday 18:00, or ISO 8601 (UTC unless it names its offset)",
        ),
    ] = None,
) -> None:
    """Every event as one JSON object a line, in chain order."""
    one_of("--format", format, ("jsonl",))
    from flowledger.storage.reads import records

    start = parse_since(since, utcnow())
    with opened(db) as store:
        out = sys.stdout
        for event in records.iter_events(store, since=start):
            # Its time as the chain hash covers it (to the microsecond, a whole second too),
            # so each line's sealed fields re-hash to its ``hash`` (docs/log-format.md).
            event["at"] = event_time(event["at"])
            out.write(json.dumps(event, default=json_default, sort_keys=True) + "\n")
