"""Screens at a fixed size, clock and data, compared by pytest-textual-snapshot with the SVGs
committed in ``__snapshots__/test_tui_snapshots/``. After an intended change of a screen,
regenerate them with ``pytest tests/functional/test_tui_snapshots.py --snapshot-update`` and
look at the new files before committing them; a failing run writes ``snapshot_report.html``
with the expected and the actual screen side by side."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from flowledger.reports import handover
from flowledger.tui.screens.dialogs import ReportScreen
from tests.support.builders import SHIFT_END
from tests.support.tui import select_hold, settle

SIZE = (120, 36)


@pytest.mark.parametrize(
    "tab", ["1", "2", "3", "4"], ids=["queue", "executions", "sources", "events"]
)
def test_main_screen_tabs_look_as_committed(app_factory, snap_compare, tab: str) -> None:
    async def open_tab(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=SIZE, run_before=open_tab)


def test_detail_screen_looks_as_committed(app_factory, snap_compare) -> None:
    async def open_conflict(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        pane_rows = pilot.app.screen.query_one("QueuePane").rows  # type: ignore[attr-defined]
        conflict = next(r["id"] for r in pane_rows if r["reason"] == "receipt_conflict")
        await select_hold(pilot, conflict)
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(app_factory(read_only=True), terminal_size=SIZE, run_before=open_conflict)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_the_queue_fits_the_terminal(app_factory, snap_compare, size: tuple[int, int]) -> None:
    async def loaded(pilot: Pilot[Any]) -> None:
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=loaded)


@pytest.mark.parametrize("tab", ["2", "3", "4"], ids=["executions", "sources", "events"])
def test_the_other_tabs_fit_80x24(app_factory, snap_compare, tab: str) -> None:
    async def open_tab(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=(80, 24), run_before=open_tab)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_a_hold_detail_fits_the_terminal(app_factory, snap_compare, size: tuple[int, int]) -> None:
    async def open_first(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=open_first)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_the_handover_view_wraps_inside_the_terminal(
    app_factory, demo_store, snap_compare, size: tuple[int, int]
) -> None:
    async def show_report(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        shift = handover.Shift(SHIFT_END - handover.DEFAULT_SHIFT, SHIFT_END, "dave")
        text = handover.build(demo_store, shift, now=SHIFT_END)
        # The report names the ledger's file; a temporary path's length varies from run to run.
        text = text.replace(str(demo_store.url.database), "var/flowledger.db")
        await pilot.app.push_screen(ReportScreen(text, "var/handover/handover.md"))
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=show_report)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_the_operations_tab_fits_the_terminal(
    app_factory, snap_compare, size: tuple[int, int]
) -> None:
    async def open_operations(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=open_operations)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_an_operation_detail_fits_the_terminal(
    app_factory, snap_compare, size: tuple[int, int]
) -> None:
    async def jump(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("g", *"demo:payout:P-2202:transfer", "enter")
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=jump)


@pytest.mark.parametrize("size", [(80, 24), (130, 38)], ids=["80x24", "130x38"])
def test_an_event_detail_fits_the_terminal(
    app_factory, snap_compare, size: tuple[int, int]
) -> None:
    async def open_resolution(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        pane = pilot.app.screen.query_one("EventsPane")
        rows = pane.rows  # type: ignore[attr-defined]
        resolved = next(i for i, r in enumerate(rows) if r["kind"] == "hold_resolved")
        pane.table.move_cursor(row=resolved)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(app_factory(), terminal_size=size, run_before=open_resolution)
