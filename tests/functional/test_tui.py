"""The terminal UI driven like a person would: keys in, widgets and the ledger checked."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from rich.console import Console
from textual.widgets import Input, Static

from flowledger.domain import DECISIONS, OpenHold, Reason, State, allowed, refusal
from flowledger.services.ledger import Ledger
from flowledger.storage.acting_models import RetryRequest
from flowledger.storage.engine import Store
from flowledger.storage.models import Event, Hold, table
from flowledger.storage.reads import chain
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import records as queries
from flowledger.tui.panes.events import EventsPane
from flowledger.tui.panes.listing import ListPane
from flowledger.tui.panes.sources import SourcesPane
from flowledger.tui.screens.actions import ACTIONS, KEYS, subject
from flowledger.tui.screens.detail import DetailScreen
from flowledger.tui.screens.dialogs import ConfirmDialog, FormDialog
from flowledger.tui.screens.main import MainScreen
from tests.support.builders import SHIFT_END
from tests.support.tui import (
    fill,
    open_detail,
    queue,
    queue_ids,
    select_hold,
    settle,
    start_action,
)

HOLDS = table(Hold)
RETRIES = table(RetryRequest)
EVENTS = table(Event)
SIZE = (120, 40)


def plain(renderable: Any) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def open_hold_id(store: Store, reason: str, operation_prefix: str = "") -> int:
    flt = holds.HoldFilter(
        fields=(("reason", reason),), words=(operation_prefix,) if operation_prefix else ()
    )
    rows = holds.hold_queue(store, SHIFT_END, flt=flt)
    assert rows, f"no open {reason} hold in the demo"
    return int(rows[0]["id"])


def hold_row(store: Store, hold_id: int) -> Any:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(HOLDS).where(HOLDS.c.id == hold_id)).one()


def events_by(store: Store, actor: str) -> list[Any]:
    with store.reader.connect() as conn:
        return conn.execute(
            sa.select(EVENTS).where(EVENTS.c.actor == actor).order_by(EVENTS.c.seq)
        ).all()


async def test_queue_shows_open_holds_soonest_deadline_first(app_factory, demo_store) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        expected = [r["id"] for r in holds.hold_queue(demo_store, SHIFT_END)]
        assert queue_ids(app) == expected
        deadlines = [r["deadline"] for r in queue(app).rows]
        assert deadlines == sorted(deadlines)
        assert deadlines[0] < SHIFT_END  # the overdue ones lead


async def test_filter_narrows_the_queue_and_survives_a_refresh(app_factory, demo_store) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"blocking")
        await settle(pilot)
        blocking = queue(app).rows
        assert blocking and all(r["blocking"] for r in blocking)
        await pilot.press("enter")  # back to the list, filter kept
        await pilot.press("down")
        selected = queue(app).current()
        assert selected is not None
        app.refresh_lists()
        await settle(pilot)
        assert queue(app).filter_text == "blocking"
        assert [r["id"] for r in queue(app).rows] == [r["id"] for r in blocking]
        assert queue(app).current()["id"] == selected["id"]  # type: ignore[index]
        await pilot.press("slash", *" owner:carol")
        await settle(pilot)
        assert [r["owner"] for r in queue(app).rows] == ["carol"]


async def test_a_filter_is_searched_a_window_at_a_time_until_the_rows_end(
    app_factory, demo_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows: list[tuple[holds.HoldFilter, int]] = []
    search = holds.search_hold_queue

    def counted(*args: Any, **kwargs: Any) -> holds.QueueSearch:
        windows.append((kwargs["flt"], kwargs["window"]))
        return search(*args, **kwargs)

    monkeypatch.setattr(holds, "SEARCH_WINDOW", 2)
    monkeypatch.setattr(holds, "search_hold_queue", counted)
    everything = holds.hold_queue(demo_store, SHIFT_END)
    last = everything[-1]  # the latest deadline: found in the last window only
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        typed = f"op:{last['operation_id']} reason:{last['reason']}"
        pane = queue(app)
        pane.query_one(Input).value = typed  # at once: a search per key would only add time
        await settle(pilot)
        assert [r["id"] for r in pane.rows] == [last["id"]]
        assert (pane.resume, pane.total) == (None, 1)
        status = str(pane.query_one(".list-status", Static).content)
        assert status.startswith("1 of 1 rows") and "searching" not in status
    # Each window as large as what was read before it: the queue's 13 holds took a few calls,
    # none of which read them all.
    typed_windows = [w for flt, w in windows if flt == holds.HoldFilter.parse(typed)]
    assert typed_windows == [2, 2, 4, 8]


async def test_a_refresh_keeps_the_cursor_on_its_hold_when_rows_move(
    app_factory, demo_store, demo_ledger: Ledger
) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        target = queue_ids(app)[3]
        await select_hold(pilot, target)
        first = queue_ids(app)[0]
        demo_ledger.resolve(first, "cancel", note="handled elsewhere", operator="erin").run()
        app.refresh_lists()
        await settle(pilot)
        assert first not in queue_ids(app)
        assert queue(app).current()["id"] == target  # type: ignore[index]


async def test_a_refresh_that_changes_nothing_leaves_the_rows_drawn_and_a_change_redraws(
    app_factory, demo_store, demo_ledger: Ledger
) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = queue(app).table
        drawn = list(table.rows)  # the table's row keys: new ones whenever it is refilled
        app.refresh_lists()
        await settle(pilot)
        assert list(table.rows) == drawn
        hold_id = queue_ids(app)[0]
        demo_ledger.update_hold(hold_id, operator="erin", owner="zed", note="mine").run()
        app.refresh_lists()
        await settle(pilot)
        assert list(table.rows) != drawn
        assert str(table.get_row_at(0)[6]) == "zed"  # the owner column


async def test_the_other_tabs_load_once_the_queue_is_painted(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, MainScreen)
        for pane in screen.query(ListPane):
            assert pane.shown > 0 and pane.rows, pane.id
        assert screen.query_one(SourcesPane).loaded


async def test_sorting_by_a_column_and_back(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")  # deadline -> opened
        await settle(pilot)
        opened = [r["opened_at"] for r in queue(app).rows]
        assert opened == sorted(opened)
        await pilot.press("S")
        await settle(pilot)
        assert [r["opened_at"] for r in queue(app).rows] == sorted(opened, reverse=True)


async def test_enter_opens_the_operation_detail(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "receipt_conflict")
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, hold_id)
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.hold is not None and app.screen.hold["id"] == hold_id
        operation = plain(app.screen.query_one("#detail-operation", Static).content)
        assert "demo:invoice:INV-1095:send" in operation and "sha256:" in operation
        executions = plain(app.screen.query_one("#detail-executions", Static).content)
        assert "https://n8n.example.com/workflow/wf-invoices/executions/7430" in executions
        events = plain(app.screen.query_one("#detail-events", Static).content)
        assert "receipt_conflict" in events and "hold_opened" in events
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


@pytest.mark.parametrize(
    ("reason", "key", "values", "resolution", "state"),
    [
        (
            "unknown_outcome",
            "c",
            {"receipt": "msg-777", "note": "seen in the sent log"},
            "confirmed_with_evidence",
            "confirmed",
        ),
        (
            "unknown_outcome",
            "r",
            {"note": "target shows nothing"},
            "released_for_retry",
            "prepared",
        ),
        ("execution_failed", "x", {"note": "no longer wanted"}, "cancelled", "cancelled"),
        ("approval_expired", "d", {"note": "approval renewed"}, "dismissed", "prepared"),
    ],
)
async def test_resolving_a_hold_records_the_operator_and_shows_the_event(
    app_factory, demo_store, reason, key, values, resolution, state
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, reason)
    head, _ = chain.chain_head(demo_store)
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, key, **values)
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle(pilot)
        row = hold_row(demo_store, hold_id)
        assert (row.resolution, row.resolved_by) == (resolution, "operator:dave")
        detail = queries.operation_detail(demo_store, row.operation_id)
        assert detail is not None and detail.operation["state"] == state
        assert hold_id not in queue_ids(app)
        assert app.last_message.startswith(f"Hold {hold_id} {resolution.split('_')[0]}")
        await pilot.press("4")
        await settle(pilot)
        rows = app.screen.query_one(EventsPane).rows
        resolved = next(r for r in rows if r["seq"] > head and r["hold_id"] == hold_id)
        assert (resolved["kind"], resolved["actor"]) == ("hold_resolved", "operator:dave")


async def test_release_warns_that_the_write_may_happen_twice(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "r", note="nothing in the bank portal")
        assert isinstance(app.screen, ConfirmDialog)
        assert "TWICE" in app.screen.message
        await pilot.press("n")
        await settle(pilot)
        assert hold_row(demo_store, hold_id).resolved_at is None
        assert events_by(demo_store, "operator:dave") == []


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        # The demo's receipt conflict is on an operation confirmed already.
        ("receipt_conflict", "(now confirmed): the operation stays CONFIRMED, with this receipt"),
        ("unknown_outcome", "(now dispatching) becomes CONFIRMED with receipt 'msg-1'"),
    ],
)
async def test_the_confirmation_says_what_becomes_of_the_operation(
    app_factory, demo_store, reason: str, said: str
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, reason)
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "c", receipt="msg-1", note="seen in the target")
        assert isinstance(app.screen, ConfirmDialog)
        assert said in app.screen.message
        await pilot.press("n")
        await settle(pilot)
    assert hold_row(demo_store, hold_id).resolved_at is None


async def test_a_note_is_required_before_anything_happens(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "c", receipt="msg-1")
        assert isinstance(app.screen, FormDialog)  # still asking
        await pilot.press("escape")
        await settle(pilot)
        assert hold_row(demo_store, hold_id).resolved_at is None


@pytest.mark.parametrize(
    ("key", "values", "kind", "column", "expected"),
    [
        (
            "a",
            {"owner": "frank", "note": "frank knows the bank"},
            "hold_assigned",
            "owner",
            "frank",
        ),
        (
            "n",
            {"note": "called the partner", "next_action": "wait for their callback"},
            "hold_noted",
            "next_action",
            "wait for their callback",
        ),
    ],
)
async def test_assign_and_note_are_recorded_as_events(
    app_factory, demo_store, key, values, kind, column, expected
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, key, **values)
        await pilot.press("y")
        await settle(pilot)
    assert getattr(hold_row(demo_store, hold_id), column) == expected
    [event] = events_by(demo_store, "operator:dave")
    assert (event.kind, event.hold_id) == (kind, hold_id)


async def test_extend_moves_the_deadline(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "e", deadline="+2h", note="bank answers soon")
        assert "2026-11-02 19:00:00" in app.screen.message  # type: ignore[attr-defined]
        await pilot.press("y")
        await settle(pilot)
    assert hold_row(demo_store, hold_id).deadline == SHIFT_END.replace(hour=19)


async def test_read_only_mode_offers_no_action(app_factory, demo_store) -> None:
    app = app_factory(read_only=True)
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        offered = {b.binding.action for b in app.active_bindings.values()}
        assert not any(a.startswith("hold_action") for a in offered)
        await select_hold(pilot, hold_id)
        for key in "crxdaen":
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, MainScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        offered = {b.binding.action for b in app.active_bindings.values()}
        assert not any(a.startswith("hold_action") for a in offered)
        await pilot.press("c")
        assert isinstance(app.screen, DetailScreen)
    assert hold_row(demo_store, hold_id).resolved_at is None
    assert "READ-ONLY" in app.sub_title


async def test_a_race_lost_to_another_operator_is_reported_and_changes_nothing(
    app_factory, demo_store, demo_ledger: Ledger
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "c", receipt="msg-1", note="saw it")
        # Meanwhile someone else decides the same hold.
        demo_ledger.resolve(
            hold_id, "release", note="no trace at the target", operator="erin"
        ).run()
        await pilot.press("y")
        await settle(pilot)
        assert "Someone else got there first" in app.last_message
        assert "operator:erin" in app.last_message
        assert "Nothing changed" in app.last_message
    row = hold_row(demo_store, hold_id)
    assert (row.resolution, row.resolved_by) == ("released_for_retry", "operator:erin")
    assert events_by(demo_store, "operator:dave") == []


async def test_the_handover_key_writes_the_same_report_as_the_command(
    app_factory, demo_store, tmp_path
) -> None:
    from flowledger.reports import handover

    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("H")
        await settle(pilot)
        assert app.last_report is not None
        written = app.last_report.read_text(encoding="utf-8")
    shift = handover.Shift(SHIFT_END - handover.DEFAULT_SHIFT, SHIFT_END, "dave")
    assert written == handover.build(demo_store, shift)
    assert app.last_report.parent == tmp_path / "reports"


async def test_scrolling_loads_the_next_page_without_gaps(app_factory, demo_store) -> None:
    app = app_factory(page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        expected = [r["id"] for r in holds.hold_queue(demo_store, SHIFT_END)]
        assert len(queue_ids(app)) < len(expected)  # a page, and the next one near its end
        for _ in range(12):
            await pilot.press("down")
            await settle(pilot)
        assert queue_ids(app) == expected


async def test_a_hold_on_an_execution_alone_shows_that_execution(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "execution_stuck")
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, hold_id)
        executions = plain(app.screen.query_one("#detail-executions", Static).content)
        assert "7460" in executions and "running" in executions
        assert "https://n8n.example.com/workflow/wf-crm/executions/7460" in executions


async def test_a_stale_workflow_version_hold_names_both_versions_and_its_count(
    app_factory, demo_store
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "stale_workflow_version")
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, hold_id)
        shown = plain(app.screen.query_one("#detail-hold", Static).content)
        assert "ran version 57db" in shown and "while f61f was active" in shown
        assert "1 execution of this pair" in shown


async def test_help_and_the_command_palette_offer_the_handover(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Handover report" in titles and "Show events" in titles


@pytest.mark.parametrize(
    ("deadline", "message"),
    [
        ("tomorrow", "cannot read 'tomorrow' as a deadline: give +30m, +2h, +1d"),
        ("2026-11-02 08:00", "2026-11-02 08:00:00 UTC is in the past"),
    ],
)
async def test_a_bad_deadline_is_shown_in_the_dialog_which_keeps_the_note(
    app_factory, demo_store, deadline: str, message: str
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    before = hold_row(demo_store, hold_id).deadline
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "e", deadline=deadline, note="bank answers at nine")
        assert isinstance(app.screen, FormDialog)  # still open, nothing lost
        assert message in str(app.screen.query_one("#preview-deadline", Static).content)
        error = str(app.screen.query_one("#form-error", Static).content)
        assert error == "New deadline: see above; nothing was done"
        assert app.screen.query_one("#field-note", Input).value == "bank answers at nine"
        await fill(pilot, deadline="tomorrow 09:00")
        assert isinstance(app.screen, ConfirmDialog)
        assert "2026-11-03 09:00:00 UTC" in app.screen.message
        await pilot.press("n")
        await settle(pilot)
    assert hold_row(demo_store, hold_id).deadline == before
    assert events_by(demo_store, "operator:dave") == []


async def test_at_80x24_the_extend_dialog_shows_its_fields_error_and_buttons(
    app_factory, demo_store
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=(80, 24)) as pilot:
        await start_action(pilot, hold_id, "e", deadline="tomorrow", note="bank answers at nine")
        dialog = app.screen
        assert isinstance(dialog, FormDialog)
        inside = dialog.query_one(".dialog").content_region  # what the box shows, unscrolled
        for selector in ("#field-deadline", "#preview-deadline", "#field-note", "#ok", "#back"):
            region = dialog.query_one(selector).region
            assert region.height > 0 and inside.contains_region(region), selector
        # The example in the placeholder is a time to come (the day after the clock's now).
        placeholder = dialog.query_one("#field-deadline", Input).placeholder
        assert "such as 2026-11-03T18:00 (UTC)" in placeholder


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("+30m", "→ 2026-11-02 17:30:00 UTC"),
        ("+1d", "→ 2026-11-03 17:00:00 UTC"),
        ("2026-11-04T06:15", "→ 2026-11-04 06:15:00 UTC"),
        ("2026-11-04T08:15+02:00", "→ 2026-11-04 06:15:00 UTC"),
    ],
)
async def test_the_deadline_field_shows_the_resolved_utc_time_as_it_is_typed(
    app_factory, demo_store, typed: str, shown: str
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await select_hold(pilot, hold_id)
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#field-deadline", Input).value = typed
        await pilot.pause()
        assert str(app.screen.query_one("#preview-deadline", Static).content).startswith(shown)


def offered_keys(app: Any) -> set[str]:
    return {
        b.binding.action.removeprefix("hold_action('").removesuffix("')")
        for b in app.active_bindings.values()
        if b.binding.action.startswith("hold_action") and b.enabled
    }


async def test_the_footer_and_palette_offer_exactly_what_the_domain_allows(
    app_factory, demo_store
) -> None:
    app = app_factory()
    rows = holds.hold_queue(demo_store, SHIFT_END)
    assert len({r["reason"] for r in rows}) >= 8  # most reasons, each offering its own
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for row in rows:
            await select_hold(pilot, row["id"])
            state = row["operation_state"]
            decisions = allowed(
                OpenHold(row["id"], Reason(row["reason"]), row["blocking"], row["cause_key"]),
                row["operation_id"],
                State(state) if state else None,
                row["operation_conflict"],
            )
            expected = {*decisions, "assign", "extend", "note"}
            assert offered_keys(app) == expected, row["reason"]
            palette = {c.title.split(" (key")[0] for c in app.get_system_commands(app.screen)} & {
                spec.title for spec in ACTIONS.values()
            }
            assert palette == {ACTIONS[name].title for name in expected}
            for name in set(DECISIONS) - expected:
                await pilot.press(KEYS[name][0])
                await pilot.pause()
                assert isinstance(app.screen, MainScreen)  # no dialog opened
                assert f"not possible for hold {row['id']}" in app.last_message
                assert str(refusal(name, *subject(row))) in app.last_message
    assert events_by(demo_store, "operator:dave") == []


async def test_releasing_a_hold_closes_the_overdue_hold_about_it(app_factory, demo_store) -> None:
    app = app_factory()
    overdue = open_hold_id(demo_store, "overdue")
    cause = int(hold_row(demo_store, overdue).cause_key.split(":")[1])
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, cause, "r", note="nothing at the bank")
        assert "overdue hold about it closes" in app.screen.message  # type: ignore[attr-defined]
        await pilot.press("y")
        await settle(pilot)
        assert overdue not in queue_ids(app) and cause not in queue_ids(app)
    row = hold_row(demo_store, overdue)
    assert (row.resolution, row.resolution_note) == (
        "cause_resolved",
        f"hold {cause} was resolved (released_for_retry)",
    )


async def test_a_failure_of_the_ledger_is_said_and_the_ui_stays_open(
    app_factory, demo_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowledger.services import actions as shared

    real = shared.call

    def failing(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)

        def run(*_a: Any, **_k: Any) -> Any:
            raise OSError(28, "No space left on device")

        return SimpleNamespace(run=run)

    monkeypatch.setattr(shared, "call", failing)
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "c", receipt="msg-1", note="saw it")
        await pilot.press("y")
        await settle(pilot)
        assert app.is_running
        assert "could not record it (OSError" in app.last_message
        assert "No space left on device" in app.last_message
        assert "look at the hold before trying again" in app.last_message
        await select_hold(pilot, hold_id)  # the queue still answers
    assert hold_row(demo_store, hold_id).resolved_at is None


# ---------------------------------------------------------------- release with a retry


def retries(store: Store) -> list[Any]:
    with store.reader.connect() as conn:
        return list(conn.execute(sa.select(RETRIES)).all())


async def release_form(pilot: Any, hold_id: int) -> FormDialog:
    """The release dialog of one hold, from the queue."""
    await settle(pilot)
    await select_hold(pilot, hold_id)
    await pilot.press("r")
    assert isinstance(pilot.app.screen, FormDialog)
    return pilot.app.screen


async def test_release_of_a_failed_execution_offers_the_retry_and_records_it(
    app_factory, demo_store
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "execution_failed")
    async with app.run_test(size=SIZE) as pilot:
        form = await release_form(pilot, hold_id)
        form.query_one("#field-retry", Input)  # offered
        await fill(pilot, retry="maybe", note="no trace at the target")
        assert isinstance(app.screen, FormDialog)  # yes or no, nothing else
        await fill(pilot, retry="yes")
        assert isinstance(app.screen, ConfirmDialog)
        assert "Then n8n is asked to run execution" in app.screen.message
        await pilot.press("y")
        await settle(pilot)
        (row,) = retries(demo_store)
        assert row.hold_id == hold_id and row.asked_by == "operator:dave"
        assert "The retry of execution" in app.last_message


async def test_release_offers_no_retry_for_an_execution_not_known_to_have_failed(
    app_factory, demo_store, demo_ledger
) -> None:
    from flowledger.domain import FailOutcome
    from tests.support.builders import req

    demo_ledger.dispatch("op:no-copy", req("9999")).run("wf")  # the ledger has no copy of it
    hold_id = demo_ledger.fail("op:no-copy", FailOutcome.UNKNOWN, "timeout").run("wf").hold_ids[0]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        assert not (await release_form(pilot, hold_id)).query("#field-retry")
        await fill(pilot, note="nothing at the target")
        await pilot.press("y")
        await settle(pilot)
    assert retries(demo_store) == []
