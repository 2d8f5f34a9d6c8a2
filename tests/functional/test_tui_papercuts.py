"""What a new user met on a first walk through the UI: ``/`` where there is no filter, ids
cut although the terminal had room, and advice the hold did not allow."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import DataTable

from tests.functional.test_tui import open_hold_id
from tests.support.tui import open_detail, select_hold, settle


def shown_ids(app: Any, pane: str) -> list[str]:
    """The operation ids a list draws, as drawn."""
    table = app.screen.query_one(f"#{pane} DataTable", DataTable)
    column = table.get_column_index("operation")
    return [str(table.get_row_at(n)[column]) for n in range(table.row_count)]


async def test_slash_on_a_tab_without_a_filter_leaves_the_keys_working(app_factory) -> None:
    app = app_factory()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("3")  # the sources have no filter
        await settle(pilot)
        await pilot.press("slash")
        await settle(pilot)
        assert "no filter" in app.last_message.lower()
        await pilot.press("q")
        await settle(pilot)
        assert not app.is_running


async def test_slash_on_a_hold_detail_leaves_its_keys_working(app_factory, demo_store) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "unknown_outcome")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_detail(pilot, hold_id)
        detail = app.screen
        await pilot.press("slash", "r")  # r: release for retry
        await settle(pilot)
        assert app.screen is not detail
        assert type(app.screen).__name__ == "FormDialog"


@pytest.mark.parametrize(("tab", "pane"), [("1", "queue"), ("5", "operations")])
async def test_operation_ids_are_whole_at_100_columns(app_factory, tab: str, pane: str) -> None:
    app = app_factory()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)
        rows = app.screen.query_one(f"#{pane}").rows
        ids = [r["operation_id"] or f"source {r['source'] or '-'}" for r in rows]
        assert shown_ids(app, pane) == ids


async def test_dismiss_on_a_receipt_conflict_advises_only_what_that_hold_allows(
    app_factory, demo_store
) -> None:
    app = app_factory()
    hold_id = open_hold_id(demo_store, "receipt_conflict")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await select_hold(pilot, hold_id)
        await pilot.press("d")
        await settle(pilot)
        said = app.last_message
        assert f"Dismiss the hold is not possible for hold {hold_id}" in said
        assert "release" not in said
        assert "confirm" in said and "cancel" in said
