"""Screens at a fixed size, clock and data, compared with the committed SVGs in
``snapshots/``. After an intended change of a screen, regenerate them with
``UPDATE_SNAPSHOTS=1 make test`` and look at the new files before committing them."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.functional.tui_pilot import select_hold, settle

SNAPSHOTS = Path(__file__).parent / "snapshots"
SIZE = (120, 36)


def _normalise(svg: str) -> str:
    # Rich names the SVG's CSS classes after a hash of the content; keep the content only.
    return re.sub(r"terminal-\d+", "terminal", svg)


def check(name: str, svg: str) -> None:
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(svg, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path.name}; run with UPDATE_SNAPSHOTS=1 to write it")
    assert _normalise(svg) == _normalise(path.read_text(encoding="utf-8")), (
        f"{name} differs from {path}; if the change is intended, UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize(
    "tab", ["1", "2", "3", "4"], ids=["queue", "executions", "sources", "events"]
)
async def test_main_screen_tabs_look_as_committed(app_factory, tab: str) -> None:
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)
        name = {"1": "queue", "2": "executions", "3": "sources", "4": "events"}[tab]
        check(name, app.export_screenshot(title="flowledger"))


async def test_detail_screen_looks_as_committed(app_factory) -> None:
    app = app_factory(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane_rows = app.screen.query_one("QueuePane").rows  # type: ignore[attr-defined]
        conflict = next(r["id"] for r in pane_rows if r["reason"] == "receipt_conflict")
        await select_hold(pilot, conflict)
        await pilot.press("enter")
        await settle(pilot)
        check("detail_read_only", app.export_screenshot(title="flowledger"))
