"""The Textual application: wiring only. Screens (:mod:`flowledger.tui.screens`) and the
main screen's lists (:mod:`flowledger.tui.panes`) are handed the
:class:`~flowledger.tui.context.Context` they work in and post what happened
(:mod:`flowledger.tui.messages`); the app decides which screen opens, what to say and which
lists to reload. Every read is a ``flowledger.storage.reads`` call and every change a
``flowledger.services.ledger.Ledger`` call, both in workers."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from flowledger.domain.display import visible
from flowledger.plumbing.clock import utcnow
from flowledger.reports import handover
from flowledger.services.ledger import Ledger
from flowledger.services.restores import warning
from flowledger.services.witnessing import alarm
from flowledger.storage.reads import records as queries
from flowledger.storage.reads.witnesses import refusals
from flowledger.tui import messages
from flowledger.tui.context import Context
from flowledger.tui.keys import GLOBAL_BINDINGS
from flowledger.tui.panes import TABS
from flowledger.tui.screens.actions import HoldActions
from flowledger.tui.screens.detail import DetailScreen
from flowledger.tui.screens.dialogs import HelpScreen, ReportScreen
from flowledger.tui.screens.jump import JumpDialog, OperationIds
from flowledger.tui.screens.main import MainScreen
from flowledger.tui.screens.operation import OperationScreen
from flowledger.tui.screens.records import EventScreen, ExecutionScreen

# How long a witness's refusal is said in a message; the header's WITNESS ALARM stays until it
# is cleared (`flowledger witness clear`), and `flowledger status` says it in full.
ALARM_SECONDS = 120.0


class FlowledgerApp(App[None]):
    TITLE = "flowledger"
    CSS_PATH = "flowledger.tcss"
    COMMANDS = App.COMMANDS | {OperationIds}
    BINDINGS = [
        *GLOBAL_BINDINGS,
        Binding("ctrl+r", "refresh_now", "Refresh", show=False),
        # Where no list's filter takes `/` (a tab without one, a detail): said, and nothing
        # else happens; the next keys work as ever.
        Binding("slash", "no_filter", show=False),
        *(Binding(tab.key, f"tab('{tab.name}')", tab.title, show=False) for tab in TABS),
    ]

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx
        self.last_message = ""
        self.last_report: Path | None = None
        self.alarms: tuple[str, ...] = ()
        self.restored_from: datetime | None = None

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.ctx, TABS)

    def on_mount(self) -> None:
        self._show_marks(self.ctx.witness_alarms, self.ctx.restored_from)
        if self.ctx.refresh_seconds:
            self.set_interval(self.ctx.refresh_seconds, self.refresh_lists)

    def _show_marks(self, alarms: tuple[str, ...], restored_from: datetime | None) -> None:
        """The header's marks, with ``alarms`` (the witnesses' refusals not yet cleared) and
        the restore not yet acknowledged. An alarm or restore not shown before is also said in
        a message; the header keeps the mark. Once all alarms are cleared, the messages still
        on the screen go with them."""
        if not alarms and self.alarms:
            # Textual removes messages all at once: a restore's warning is said again.
            self.clear_notifications()
            self.restored_from = None
        if restored_from is not None and restored_from != self.restored_from:
            self.report(warning(restored_from), "warning", timeout=60)
        for line in alarms:
            if line not in self.alarms:
                self.report(line, "error", timeout=ALARM_SECONDS)
        self.alarms, self.restored_from = alarms, restored_from
        marks = [f"operator {self.ctx.operator}"]
        if self.ctx.read_only:
            marks.append("READ-ONLY")
        if self.ctx.demo:
            marks.append("DEMO DATA")
        if self.ctx.config_error:
            marks.append("CONFIG BROKEN [3]")  # short: the header has 80 cells at times
        if restored_from is not None:
            marks.append("RESTORED")
        if alarms:
            marks.append("WITNESS ALARM")
        self.sub_title = " · ".join(marks)

    @work(thread=True, exclusive=True, group="marks")
    def _read_marks(self) -> None:
        """A witness that refuses a checkpoint while the UI is open, a ``witness clear`` or a
        ``restored --ack`` shows at the next refresh, as the lists do."""
        alarms = tuple(alarm(w) for w in refusals(self.ctx.store))
        restored_from = queries.restored_from(self.ctx.store)
        if (alarms, restored_from) != (self.alarms, self.restored_from):
            self.call_from_thread(self._show_marks, alarms, restored_from)

    def report(
        self, message: str, severity: SeverityLevel = "information", timeout: float = 8
    ) -> None:
        """Tell the person what happened (and keep it for whoever asks)."""
        self.last_message = message
        self.notify(visible(message), severity=severity, timeout=timeout, markup=False)

    @on(messages.Report)
    def _reported(self, message: messages.Report) -> None:
        self.report(message.text, message.severity)

    @on(messages.HoldActedOn)
    def _acted_on(self) -> None:
        self.refresh_lists()

    @on(messages.OpenHold)
    def _open_hold(self, message: messages.OpenHold) -> None:
        self.push_screen(DetailScreen(self.ctx, message.hold_id))

    @on(messages.OpenOperation)
    def _open_operation(self, message: messages.OpenOperation) -> None:
        self.push_screen(OperationScreen(self.ctx, message.operation_id))

    @on(messages.OpenEvent)
    def _open_event(self, message: messages.OpenEvent) -> None:
        self.push_screen(EventScreen(message.event))

    @on(messages.OpenExecution)
    def _open_execution(self, message: messages.OpenExecution) -> None:
        self.push_screen(ExecutionScreen(self.ctx, message.execution))

    def refresh_lists(self) -> None:
        self._read_marks()
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.refresh_lists()
            elif isinstance(screen, OperationScreen):
                screen.load()  # an action on one of its holds changes what it shows

    def action_refresh_now(self) -> None:
        self.refresh_lists()

    def action_no_filter(self) -> None:
        self.report("No filter here: / filters the lists.", timeout=3)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(TABS))

    def action_jump(self) -> None:
        """Ask for an operation id, from anywhere, and open that operation."""

        def opened(operation_id: str | None) -> None:
            if operation_id is not None:
                self.post_message(messages.OpenOperation(operation_id))

        self.push_screen(JumpDialog(self.ctx), opened)

    def action_tab(self, name: str) -> None:
        """Show tab ``name`` of the main screen (its key works there only)."""
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.action_tab(name)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "tab":
            return isinstance(self.screen, MainScreen)
        return True

    def action_handover(self) -> None:
        self._write_handover()

    @work(thread=True, exclusive=True, group="handover")
    def _write_handover(self) -> None:
        now = self.ctx.now()
        shift = handover.Shift(now - handover.DEFAULT_SHIFT, now, self.ctx.operator)
        text = handover.build(self.ctx.store, shift, now=now)
        path = handover.save(text, self.ctx.report_dir, now)
        self.last_report = path
        self.call_from_thread(self.push_screen, ReportScreen(text, str(path)))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Handover report", "Write the shift's report (Markdown)", self.action_handover
        )
        yield SystemCommand("Refresh", "Reload every list now", self.refresh_lists)
        yield SystemCommand(
            "Go to operation…", "Open an operation by its id (key g)", self.action_jump
        )
        if isinstance(screen, HoldActions) and not self.ctx.read_only:
            yield from screen.commands()
        for tab in TABS:
            yield SystemCommand(
                f"Show {tab.name}",
                f"Switch to the {tab.name} tab (key {tab.key})",
                partial(self.action_tab, tab.name),
            )


def make_app(
    ledger: Ledger,
    *,
    operator: str | None = None,
    read_only: bool = False,
    clock: Callable[[], datetime] = utcnow,
    report_dir: Path | None = None,
    page_size: int = 60,
    refresh_seconds: float | None = 5.0,
    config_error: str | None = None,
) -> FlowledgerApp:
    """The app over ``ledger``'s services; tests pass a fixed clock and no refresh timer.
    ``config_error``: why ``flowledger.toml`` could not be read (the ledger was built on the
    defaults), shown on the Sources tab."""
    ctx = Context(
        ledger=ledger,
        operator=operator or getpass.getuser(),
        read_only=read_only,
        clock=clock,
        report_dir=report_dir or Path.cwd() / handover.DEFAULT_FOLDER,
        page_size=page_size,
        refresh_seconds=refresh_seconds,
        demo=queries.is_demo(ledger.store),
        restored_from=queries.restored_from(ledger.store),
        witness_alarms=tuple(alarm(w) for w in refusals(ledger.store)),
        config_error=config_error,
    )
    return FlowledgerApp(ctx)


__all__ = ["FlowledgerApp", "make_app"]
