"""The handover report says what the database says: counts, names, deadlines, the head hash."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from flowledger.config import SourceConfig, SweepConfig
from flowledger.domain import FailOutcome
from flowledger.reports import handover
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.models import Source, table
from flowledger.storage.reads.chain import chain_head
from flowledger.storage.reads.hold_queue import hold_queue
from tests.support.builders import T0, FakeClock, req


def _unknown(ledger: Ledger, op: str, n: int) -> int:
    ledger.dispatch(op, req(f"exec-{n}", input={"n": n})).run("workflow")
    answer = ledger.fail(op, FailOutcome.UNKNOWN, "timeout", execution_id=f"exec-{n}").run("wf")
    return answer.hold_ids[0]


def scripted_shift(ledger: Ledger, clock: FakeClock) -> dict[str, int]:
    """Before the shift: one hold. During it: four more, two resolved, one assigned."""
    holds = {"old": _unknown(ledger, "op:old", 0)}
    clock.advance(hours=2)  # the shift starts at T0 + 1h
    for n, name in enumerate(["a", "b", "c", "d"], start=1):
        holds[name] = _unknown(ledger, f"op:{name}", n)
        clock.advance(minutes=10)
    ledger.resolve(
        holds["a"], "confirm", receipt="R-a", note="seen at the target", operator="bob"
    ).run()
    ledger.resolve(holds["b"], "release", note="nothing at the target", operator="carol").run()
    ledger.update_hold(
        holds["c"],
        operator="bob",
        owner="alice",
        note="alice has access",
        next_action="call the bank",
    ).run()
    with ledger.store.engine.begin() as conn:
        conn.execute(
            table(Source).insert(),
            [
                {
                    "name": "good",
                    "kind": "n8n",
                    "status": "ok",
                    "last_success_at": clock.now,
                    "last_error": None,
                    "last_error_at": None,
                },
                {
                    "name": "broken",
                    "kind": "n8n",
                    "status": "error",
                    "last_success_at": clock.now - timedelta(hours=5),
                    "last_error": "401 Unauthorized",
                    "last_error_at": clock.now,
                },
            ],
        )
    clock.advance(minutes=50)
    return holds


def test_handover_report_matches_the_database(ledger: Ledger, clock: FakeClock) -> None:
    holds = scripted_shift(ledger, clock)
    now = clock.now
    text = handover.build(ledger.store, handover.Shift(T0 + timedelta(hours=1), now, "dave"))

    open_rows = hold_queue(ledger.store, now, limit=100)
    overdue = [h for h in open_rows if h["deadline"] <= now]
    # "old" and "c" passed their one-hour deadline; "d" is due right now, which is overdue too
    # (as `flowledger status`, the metrics and the sweep count it).
    assert len(open_rows) == 3
    assert {h["id"] for h in overdue} == {holds["old"], holds["c"], holds["d"]}
    assert "- Open holds: 3 (3 blocking, 3 overdue)" in text
    assert "- Resolved during the shift: 2" in text
    assert "By whom: operator:bob 1, operator:carol 1." in text
    assert "### alice — 1 open, 1 overdue" in text
    assert "### (unassigned) — 2 open, 2 overdue" in text
    assert "call the bank" in text
    for h in open_rows:
        assert handover.when(h["deadline"]) in text
    old = next(h for h in open_rows if h["id"] == holds["old"])
    assert f"**OVERDUE {handover.span(now - old['deadline'])}**" in text
    assert "| op:a | confirmed_with_evidence | R-a | operator:bob | seen at the target |" in text
    assert "| op:b | released_for_retry | - | operator:carol | nothing at the target |" in text
    assert "- **broken** (n8n): status error; last error at" in text
    assert "good" not in text.split("## Sources in trouble")[1]
    seq, head_hash = chain_head(ledger.store)
    assert f"seq {seq}, hash `{head_hash}`" in text


def test_resolutions_outside_the_shift_are_left_out(ledger: Ledger, clock: FakeClock) -> None:
    holds = scripted_shift(ledger, clock)
    later = handover.Shift(clock.now, clock.now + timedelta(hours=8))
    text = handover.build(ledger.store, later)
    assert "Nothing was resolved during the shift." in text
    assert f"| {holds['a']} |" not in text


def test_report_cells_cannot_break_the_markdown_table(ledger: Ledger, clock: FakeClock) -> None:
    hold = _unknown(ledger, "op:x", 1)
    ledger.update_hold(hold, operator="bob", note="n", next_action="a | b\nc").run()
    text = handover.build(ledger.store, handover.Shift(T0, clock.now))
    assert "a \\| b c" in text


def test_an_empty_ledger_has_a_short_report(ledger: Ledger, clock: FakeClock) -> None:
    text = handover.build(ledger.store, handover.Shift(T0 - timedelta(hours=8), T0))
    assert "No open holds." in text and "All sources synced recently" in text
    with ledger.store.reader.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM events")).scalar_one() == 0


def trouble(text: str) -> list[str]:
    """The lines of the report's "Sources in trouble" section."""
    section = text.split("## Sources in trouble\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line]


def test_a_configured_source_that_never_synced_is_listed_as_such(
    ledger: Ledger, clock: FakeClock
) -> None:
    configured = SourceConfig(name="new-n8n", kind="n8n", base_url="http://127.0.0.1:5678")
    Sweep(ledger, SweepConfig(), [configured]).run()  # the sweep notes every configured source
    text = handover.build(ledger.store, handover.Shift(T0 - timedelta(hours=8), T0))
    assert "- Sources in trouble: 1" in text
    assert trouble(text) == ["- **new-n8n** (n8n): never synced successfully"]


def test_a_source_is_in_trouble_once_its_last_success_is_over_an_hour_old(
    ledger: Ledger, clock: FakeClock
) -> None:
    with ledger.store.engine.begin() as conn:
        conn.execute(
            table(Source).insert(),
            [
                {"name": "on-time", "kind": "n8n", "last_success_at": T0 - timedelta(hours=1)},
                {"name": "late", "kind": "airflow", "last_success_at": T0 - timedelta(minutes=61)},
            ],
        )
    text = handover.build(ledger.store, handover.Shift(T0 - timedelta(hours=8), T0))
    assert "- Sources in trouble: 1" in text
    assert trouble(text) == ["- **late** (airflow): last successful sync 1h 01m ago"]


def test_the_report_prints_the_verify_command_for_this_ledger_with_its_db(
    ledger: Ledger, clock: FakeClock
) -> None:
    scripted_shift(ledger, clock)
    text = handover.build(ledger.store, handover.Shift(T0, clock.now))
    _, head_hash = chain_head(ledger.store)
    url = ledger.store.url
    where = url.database if url.get_backend_name() == "sqlite" else None
    command = handover.verify_command(ledger.store, head_hash)
    assert f"`{command}`" in text
    assert command.startswith("flowledger verify --db ")
    assert command.endswith(f" --expect-head {head_hash}")
    if where is not None:
        assert f"--db {where} " in command
    else:
        assert "postgresql://" in command and "***" not in command
