"""At 80x24 the keys never surprise: the footer keeps the global keys at its right on every
screen and shows the screen's actions whole; the jump picks any of several matches; an
extension never shortens a deadline."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from flowledger.storage.reads import hold_queue as holds
from flowledger.tui.keys import KeyHint, KeysFooter
from flowledger.tui.panes.queue import QueuePane
from flowledger.tui.screens.detail import DetailScreen
from flowledger.tui.screens.dialogs import ConfirmDialog, FormDialog
from flowledger.tui.screens.jump import JumpDialog
from flowledger.tui.screens.main import MainScreen
from flowledger.tui.screens.operation import OperationScreen
from tests.functional.test_tui import hold_row, open_hold_id, plain
from tests.support.builders import SHIFT_END
from tests.support.tui import fill, open_detail, queue, select_hold, settle, start_action

SIZE = (80, 24)


def footer_keys(app: Any) -> tuple[list[str], list[str]]:
    """The footer's global keys and the screen's, as shown (``key description``), after
    checking that every screen key is whole and left of the global ones."""
    footer = app.screen.query_one(KeysFooter)
    fixed = footer.query_one(".global-keys")
    shown: list[str] = []
    for key in footer.query(KeyHint):
        if key.parent is not fixed:
            assert key.region.right <= fixed.region.x, f"{key.description} is cut or covered"
            shown.append(f"{key.key_display} {key.description}")
    assert fixed.region.right <= footer.region.right
    globals_ = [f"{k.key_display} {k.description}" for k in fixed.query(KeyHint)]
    return globals_, shown


async def jump_typing(pilot: Pilot[Any], *keys: str) -> None:
    """Press ``g`` and type ``keys`` into the jump dialog once it is open."""
    await settle(pilot)
    await pilot.press("g")
    await settle(pilot)
    await pilot.press(*keys)
    await settle(pilot)


async def test_the_footer_shows_help_and_quit_on_every_screen(app_factory, demo_store) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        seen: dict[str, list[str]] = {}
        for tab in "12345":
            await pilot.press(tab)
            await settle(pilot)
            fixed, seen[tab] = footer_keys(app)
            assert fixed == ["? Help", "q Quit", "g Go to", "H Handover"]
        assert seen["1"][:2] == ["c Confirm", "x Cancel"]  # the receipt conflict leads
        assert "/ Filter" not in seen["3"]  # the sources have no filter
        assert "v Verify" in seen["4"]
        await pilot.press("1")
        await open_detail(pilot, open_hold_id(demo_store, "unknown_outcome"))
        assert isinstance(app.screen, DetailScreen)
        fixed, shown = footer_keys(app)
        assert fixed[:2] == ["? Help", "q Quit"]
        assert shown[:3] == ["esc Back", "c Confirm", "r Release"]
        await pilot.press("escape")
        await jump_typing(pilot, *"demo:invoice:INV-1095:send", "enter")
        assert isinstance(app.screen, OperationScreen)
        fixed, shown = footer_keys(app)
        assert fixed[:2] == ["? Help", "q Quit"] and shown == ["esc Back", "h Open hold"]


async def test_the_jump_picks_the_second_of_several_matches_with_arrow_and_enter(
    app_factory,
) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await jump_typing(pilot, *"demo:invoice")
        dialog = app.screen
        assert isinstance(dialog, JumpDialog)
        assert len(dialog.matches) > 2
        assert dialog.query_one(OptionList).option_count == len(dialog.matches)
        note = str(dialog.query_one("#jump-note", Static).render())
        assert "ids start with this: down / up picks one, enter opens it" in note
        second = dialog.matches[1]
        await pilot.press("down", "down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, OperationScreen)
        assert app.screen.operation_id == second


async def test_enter_on_several_matches_without_a_pick_keeps_the_dialog_open(
    app_factory,
) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await jump_typing(pilot, *"demo:invoice", "enter")
        assert isinstance(app.screen, JumpDialog)
        assert "pick one with down / up" in app.last_message


async def test_slash_on_a_list_goes_to_its_filter(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"stuck")
        await settle(pilot)
        assert queue(app).query_one(Input).value == "stuck"
        assert isinstance(app.screen, MainScreen)


async def test_extend_never_shortens_and_counts_from_the_current_deadline(
    app_factory, demo_store
) -> None:
    app = app_factory()
    ahead = [h for h in holds.hold_queue(demo_store, SHIFT_END) if h["deadline"] > SHIFT_END]
    hold_id, due = ahead[0]["id"], ahead[0]["deadline"]
    earlier = (due - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "e", deadline=earlier, note="bank answers at nine")
        assert isinstance(app.screen, FormDialog)  # refused in the dialog, nothing done
        assert "never moves a deadline earlier" in str(
            app.screen.query_one("#preview-deadline").content  # type: ignore[attr-defined]
        )
        await fill(pilot, deadline="+2h")
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await settle(pilot)
    assert hold_row(demo_store, hold_id).deadline == due + timedelta(hours=2)


async def test_a_toast_names_the_new_owner_and_the_detail_shows_the_notes(
    app_factory, demo_store
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=SIZE) as pilot:
        await start_action(pilot, hold_id, "a", owner="carol", note="she has the mail logs")
        await pilot.press("y")
        await settle(pilot)
        assert app.last_message == f"Hold {hold_id} assigned to carol by dave."
        await select_hold(pilot, hold_id)
        await pilot.press("enter")
        await settle(pilot)
        panel = plain(app.screen.query_one("#detail-hold", Static).content)
        assert "operator:dave: she has the mail logs (assigned to carol)" in panel


async def test_sort_steps_only_through_the_columns_shown(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.screen.query_one(QueuePane)
        hidden = {"owner", "workflow", "age"} - set(pane.shown_keys)
        assert hidden, "80 columns hide some of the queue's columns"
        sorts = []
        for _ in range(7):
            await pilot.press("s")
            await settle(pilot)
            sorts.append(pane.sort)
        assert {"owner", "workflow", "opened"} & set(sorts) == set()
        assert "reason" in sorts and "deadline" in sorts


async def test_an_empty_queue_says_nothing_needs_you(app_factory, demo_ledger) -> None:
    while held := holds.hold_queue(demo_ledger.store, SHIFT_END, limit=1):
        how = "cancel" if held[0]["blocking"] else "dismiss"  # closes its overdue holds too
        demo_ledger.resolve(held[0]["id"], how, note="done", operator="x").run()
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        status = str(queue(app).query_one(".list-status", Static).content)
        assert status.startswith("Nothing needs you")


async def test_every_lists_filter_hint_is_whole_in_80_columns(app_factory) -> None:
    """The hint under each list says what its filter takes; cut at the edge, the last pairs
    were lost (the queue's ``blocking``)."""
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for tab in ("1", "2", "4", "5"):  # the queue, executions, events, operations
            await pilot.press(tab)
            await settle(pilot)
            for hint in app.screen.query("Input.filter").results(Input):
                if hint.display and hint.region.width:
                    assert len(hint.placeholder) <= hint.content_region.width, hint.placeholder
