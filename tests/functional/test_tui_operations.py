"""The terminal UI finds any operation and opens any row: the Operations tab, the jump to an
operation id (a key and the command palette), the dispatches an operation turned away, the
Events tab's header read with its list, and an event's or an execution's detail."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.command import CommandList, CommandPalette
from textual.geometry import Region
from textual.widgets import DataTable, Input, Static

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads import chain, event_log
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import operation_pages as operations
from flowledger.storage.reads import records as queries
from flowledger.tui.format import middle
from flowledger.tui.messages import OpenOperation
from flowledger.tui.panes.events import EventsPane
from flowledger.tui.panes.executions import ExecutionsPane
from flowledger.tui.panes.operations import OperationsPane
from flowledger.tui.screens.jump import JumpDialog
from flowledger.tui.screens.main import MainScreen
from flowledger.tui.screens.operation import OperationScreen
from flowledger.tui.screens.records import EventScreen, ExecutionScreen
from tests.support.builders import req
from tests.support.tui import fill, settle, start_action, until

SIZE = (120, 40)
BUSY = "demo:payout:P-2299:transfer"


def palette_hits(app: Any) -> str:
    """The command palette's listed hits, one a line ("" while it is not open)."""
    if not isinstance(app.screen, CommandPalette):
        return ""
    listed = app.screen.query_one(CommandList)
    return "\n".join(str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count))


def plain(renderable: Any) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def main(app: Any) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


def turned_away_line(app: Any, asking: str) -> str:
    """The operation screen's one turned-away dispatch, the line naming ``asking``."""
    turned = plain(app.screen.query_one("#op-turned", Static).content)
    assert "Dispatches turned away (1)" in turned
    return next(ln for ln in turned.splitlines() if asking in ln)


async def events_tab(pilot: Any) -> EventsPane:
    """The Events tab, loaded."""
    await settle(pilot)
    await pilot.press("4")
    await settle(pilot)
    return main(pilot.app).query_one(EventsPane)


def turn_one_away(ledger: Ledger) -> None:
    """Execution 7501 is writing the payout; 7502 asks too and is answered hold (in_flight),
    which opens no hold: only the operation's record shows it."""
    ledger.dispatch(BUSY, req("7501", input={"p": 2299})).run("wf-payouts")
    answer = ledger.dispatch(BUSY, req("7502", input={"p": 2299})).run("wf-payouts")
    assert (answer.decision, answer.reason, answer.hold_ids) == ("hold", "in_flight", [])


async def test_the_jump_key_opens_an_operation_from_anywhere(app_factory, demo_store) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")  # from another tab
        await pilot.press("g")
        assert isinstance(app.screen, JumpDialog)
        await pilot.press(*"demo:invoice:INV-1095")  # the beginning of one id only
        await settle(pilot)
        assert app.screen.matches == ["demo:invoice:INV-1095:send"]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, OperationScreen)
        assert app.screen.operation_id == "demo:invoice:INV-1095:send"
        shown = plain(app.screen.query_one("#op-summary", Static).content)
        assert "demo:invoice:INV-1095:send" in shown and "CONFIRMED" in shown
        holds = plain(app.screen.query_one("#op-holds", Static).content)
        assert "receipt_conflict" in holds
        await pilot.press("h")  # its open hold, where the decisions are
        await settle(pilot)
        assert type(app.screen).__name__ == "DetailScreen"


async def test_an_unknown_id_keeps_the_jump_dialog_open_with_what_was_typed(
    app_factory,
) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g", *"demo:nope")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JumpDialog)
        assert app.screen.query_one(Input).value == "demo:nope"
        assert "No operation id starts with demo:nope" in plain(
            app.screen.query_one("#jump-note", Static).content
        )
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_the_command_palette_finds_an_operation_by_its_id(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"demo:crm:contact-377")
        # The palette's search runs in a worker: its hit listed is waited for, not a time.
        await until(pilot, lambda: "contact-377:upsert" in palette_hits(app), "the palette's hit")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, OperationScreen)
        assert app.screen.operation_id == "demo:crm:contact-377:upsert"


async def test_an_operation_shows_the_dispatch_it_turned_away(
    app_factory, demo_ledger: Ledger
) -> None:
    turn_one_away(demo_ledger)
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5")
        pane = main(app).query_one(OperationsPane)
        await pilot.press("slash", *"dispatching P-2299")
        await settle(pilot)
        assert [r["operation_id"] for r in pane.rows] == [BUSY]
        await pilot.press("enter")  # back to the list
        await pilot.press("enter")  # open the operation
        await settle(pilot)
        assert isinstance(app.screen, OperationScreen)
        line = turned_away_line(app, "7502")
        assert "in_flight" in line and "7501" in line  # asking, why, and who is writing


async def test_the_demo_shows_a_dispatch_turned_away_while_another_was_writing(
    app_factory,
) -> None:
    """What ``flowledger demo`` gives a new user to find: g, the id, and the turned-away ask."""
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g", *"demo:crm:contact-377:upsert", "enter")
        await settle(pilot)
        assert isinstance(app.screen, OperationScreen)
        line = turned_away_line(app, "7421")
        assert "in_flight" in line and "7420" in line


async def test_the_operations_tab_pages_every_operation_most_recently_changed_first(
    app_factory, demo_store: Store
) -> None:
    app = app_factory(page_size=7)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5")
        pane = main(app).query_one(OperationsPane)
        await settle(pilot)
        expected = [r["operation_id"] for r in operations.list_operations(demo_store, limit=1000)]
        for _ in range(len(expected)):
            await pilot.press("down")
        await settle(pilot)
        assert [r["operation_id"] for r in pane.rows] == expected
        assert pane.total == len(expected)
        await pilot.press("slash", *"state:confirmed")
        await settle(pilot)
        assert pane.rows and {r["state"] for r in pane.rows} == {"confirmed"}


async def test_a_word_filter_on_the_operations_is_searched_a_window_at_a_time(
    app_factory, demo_store: Store, monkeypatch: Any
) -> None:
    monkeypatch.setattr(holds, "SEARCH_WINDOW", 1)
    oldest = operations.list_operations(demo_store, limit=1000)[-1]["operation_id"]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5")
        pane = main(app).query_one(OperationsPane)
        await settle(pilot)
        await pilot.press("slash", *oldest)  # a word: the last operation changed, alone
        await settle(pilot)
        assert [r["operation_id"] for r in pane.rows] == [oldest]
        assert (pane.resume, pane.total) == (None, 1)
        assert pane.read > 0  # it went window by window


async def test_the_events_header_and_list_agree_after_an_action(
    app_factory, demo_store: Store
) -> None:
    app = app_factory()
    hold_id = holds.hold_queue(demo_store, app.ctx.now())[0]["id"]
    async with app.run_test(size=SIZE) as pilot:
        events = await events_tab(pilot)
        before = chain.chain_head(demo_store)
        assert events.head == before and events.rows[0]["seq"] == before[0]
        await pilot.press("1")
        await start_action(pilot, hold_id, "n", note="called the bank")
        await pilot.press("y")
        await settle(pilot)
        after = chain.chain_head(demo_store)
        assert after[0] == before[0] + 1
        # No refresh asked for: the action reloads the lists. The cursor, on the newest row
        # before, is on the newest row now: the new event is in sight, under its header.
        assert events.head == after
        assert events.rows[0]["seq"] == after[0] and events.rows[0]["kind"] == "hold_noted"
        assert (events.table.cursor_row, events.table.scroll_y) == (0, 0)
        assert str(events.table.get_row_at(0)[0]) == str(after[0])
        header = plain(events.query_one("#chain-status", Static).content)
        assert f"head seq {after[0]:,}" in header
        assert f"chain OK through seq {before[0]:,}, 1 newer not verified yet" in header
        await pilot.press("4", "v")
        await settle(pilot)
        assert app.last_message.startswith(f"Chain OK: {after[0]:,} events, head seq {after[0]}")
        assert f"chain OK through seq {after[0]:,}" in plain(
            events.query_one("#chain-status", Static).content
        )


async def test_verify_is_in_the_footer_on_the_events_tab_only(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        def offered() -> set[str]:
            return {b.binding.action for b in app.screen.active_bindings.values() if b.enabled}

        assert "pane('verify')" not in offered()
        await pilot.press("4")
        await settle(pilot)
        assert "pane('verify')" in offered()


async def test_enter_on_an_event_opens_its_whole_data(app_factory, demo_store: Store) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        events = await events_tab(pilot)
        resolved = next(i for i, r in enumerate(events.rows) if r["kind"] == "hold_resolved")
        events.table.move_cursor(row=resolved)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, EventScreen)
        row = events.rows[resolved]
        data = plain(app.screen.query_one("#event-data", Static).content)
        for key, value in row["data"].items():
            assert f'"{key}"' in data
            if isinstance(value, str):
                assert value in data  # whole, not cut as in the list
        assert row["hash"] in plain(app.screen.query_one("#event-fields", Static).content)
        assert row["operation_id"] in plain(app.screen.query_one("#event-summary", Static).content)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_enter_on_an_execution_links_to_the_tool_unwrapped(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        pane = main(app).query_one(ExecutionsPane)
        index = next(i for i, r in enumerate(pane.rows) if r["external_id"] == "7430")
        pane.query_one(DataTable).move_cursor(row=index)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ExecutionScreen)
        link = app.screen.query_one("#execution-link", Static).content
        assert isinstance(link, Text)
        url = "https://n8n.example.com/workflow/wf-invoices/executions/7430"
        assert link.plain == url and link.no_wrap
        assert {span.style.link for span in link.spans} | {link.style.link} >= {url}  # type: ignore[union-attr]
        made = plain(app.screen.query_one("#execution-attempts", Static).content)
        assert "demo:invoice:INV-1095:send" in made


async def test_an_action_on_an_operations_hold_shows_on_the_operation(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("g", *"demo:invoice:INV-1095:send", "enter")
        await settle(pilot)
        operation = app.screen
        assert isinstance(operation, OperationScreen)
        assert "zoe" not in plain(operation.query_one("#op-holds", Static).content)
        await pilot.press("h")
        await settle(pilot)
        await pilot.press("a")
        await fill(pilot, owner="zoe", note="she has the mail logs")
        await pilot.press("y")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is operation
        assert "zoe" in plain(operation.query_one("#op-holds", Static).content)


async def test_an_operations_holds_fit_80x24_without_a_word_split(app_factory, demo_ledger) -> None:
    """Each column gets at least its longest word: at 80 columns the times are shortened and
    the reason wraps between words, where rich would fold ``unknown_outcome`` mid-word."""
    payout = "demo:payout:P-2202:transfer"  # a blocking unknown_outcome and its overdue hold
    detail = queries.operation_detail(demo_ledger.store, payout)
    assert detail is not None
    blocking, overdue = (h["id"] for h in detail.holds)
    owner = "carol.from.the.night.shift"
    demo_ledger.update_hold(blocking, operator="dave", note="mine", owner=owner).run()
    demo_ledger.resolve(overdue, "dismiss", note="seen", operator="dave").run()
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.post_message(OpenOperation(payout))
        await settle(pilot)
        part = app.screen.query_one("#op-holds", Static)
        lines = [s.text for s in part.render_lines(Region(0, 0, *part.size))]
    shown = "\n".join(lines)
    words = ["unknown_outcome", "(blocking)", "overdue", "dismissed", "OPEN", "operator:dave"]
    assert [w for w in words if w not in shown.split()] == []
    assert middle(owner, 16) in shown.split()  # the owner's middle cut out, not folded
    assert all(len(line) <= 80 for line in lines)


async def test_the_events_filter_is_searched_a_window_of_the_log_at_a_time(
    app_factory, demo_store, monkeypatch
) -> None:
    pages: list[tuple[int, int]] = []  # (window, events it covered)
    page_of = event_log.event_page

    def recorded(*args: Any, **kwargs: Any) -> event_log.EventPage:
        page = page_of(*args, **kwargs)
        if kwargs["text"]:
            pages.append((kwargs["window"], page.read))
        return page

    monkeypatch.setattr(holds, "SEARCH_WINDOW", 2)
    monkeypatch.setattr(event_log, "event_page", recorded)
    head = chain.chain_head(demo_store)[0]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        pane = await events_tab(pilot)
        pane.query_one(Input).value = "no-such-word"
        # The search goes on from one window to the next after each is painted: wait until
        # it has stopped (one settle may fall between two windows on a busy machine).
        for _ in range(20):
            await settle(pilot)
            if pane.filter_text and pane.shown == pane.generation and pane.exhausted:
                break
        assert (pane.rows, pane.resume, pane.total) == ([], None, 0)
        assert "searching" not in str(pane.query_one(".list-status", Static).content)
    # Each window as large as what was read before it, and none read more than its window,
    # until the windows reached the log's first event.
    assert [w for w, _ in pages[:4]] == [2, 2, 4, 8]
    assert all(read <= window for window, read in pages)
    assert sum(read for _, read in pages) == head
