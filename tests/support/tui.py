"""Steps the UI tests share: wait for the workers, pick a hold, fill a dialog."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Button, Input

from flowledger.tui import FlowledgerApp
from flowledger.tui.panes.queue import QueuePane
from flowledger.tui.screens.dialogs import ConfirmDialog, FormDialog
from flowledger.tui.screens.main import MainScreen


async def settle(pilot: Pilot[Any]) -> None:
    """Wait until no worker runs (a worker's result may start another). While one of an
    action's dialogs is open its worker is left alone: it waits for that dialog's answer.
    Once the dialog is answered the action's write is waited for like any load, so what the
    action changed is on the screen when this returns."""
    app = pilot.app
    for _ in range(10):
        await pilot.pause()
        asking = isinstance(app.screen, (FormDialog, ConfirmDialog))
        loading = [
            w
            for w in app.workers
            if not w.is_finished and not (asking and w.group == "hold-action")
        ]
        if not loading:
            await pilot.pause()
            return
        await app.workers.wait_for_complete(loading)


async def until(
    pilot: Pilot[Any], condition: Callable[[], bool], what: str, within: float = 30.0
) -> None:
    """Let the app run until ``condition`` holds; fail naming ``what`` after ``within``
    seconds (a bound for a loaded machine, not a wait: it returns as soon as it holds)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)  # polling a condition, bounded


def queue(app: FlowledgerApp) -> QueuePane:
    return app.screen.query_one(QueuePane) if isinstance(app.screen, MainScreen) else _main(app)


def _main(app: FlowledgerApp) -> QueuePane:
    main = next(s for s in app.screen_stack if isinstance(s, MainScreen))
    return main.query_one(QueuePane)


def queue_ids(app: FlowledgerApp) -> list[int]:
    return [row["id"] for row in queue(app).rows]


async def select_hold(pilot: Pilot[Any], hold_id: int) -> None:
    pane = queue(pilot.app)  # type: ignore[arg-type]
    pane.table.move_cursor(row=queue_ids(pilot.app).index(hold_id))  # type: ignore[arg-type]
    await pilot.pause()
    assert pane.current() is not None and pane.current()["id"] == hold_id  # type: ignore[index]


async def fill(pilot: Pilot[Any], **values: str) -> None:
    """Fill the open form's fields and submit it. A button ignores clicks while it still
    shows its last press (Textual's ``active_effect_duration``, 0.2 s): a form submitted again
    right after it refused would not have been, so the press shown is waited out first."""
    form = pilot.app.screen
    for name, value in values.items():
        form.query_one(f"#field-{name}", Input).value = value
    ok = form.query_one("#ok", Button)
    while ok.has_class("-active"):
        await pilot.pause(0.02)
    await pilot.pause()
    await pilot.click("#ok")
    await pilot.pause()


async def start_action(pilot: Pilot[Any], hold_id: int, key: str, **values: str) -> None:
    """Pick the hold, press the action's key and fill its form (the confirmation comes next)."""
    await settle(pilot)
    await select_hold(pilot, hold_id)
    await pilot.press(key)
    await fill(pilot, **values)


async def open_detail(pilot: Pilot[Any], hold_id: int) -> None:
    """From the queue, open the detail of one hold."""
    await settle(pilot)
    await select_hold(pilot, hold_id)
    await pilot.press("enter")
    await settle(pilot)
