"""Modal screens: the form an action asks for, the confirmation before it runs, help, and the
handover report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown, Static

from flowledger.tui.tabs import Tab


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    required: bool = True
    placeholder: str = ""
    # Reads the typed value: returns what it means (shown live under the field) or raises
    # ValueError saying what is wrong.
    check: Callable[[str], str] | None = None


class FormDialog(ModalScreen[dict[str, str] | None]):
    """Ask for an action's values. It returns only once every required field is filled and
    every check passes; until then it stays open with what was typed and says what is wrong.
    Its fields and buttons are one line each, so that the whole form fits 80x24."""

    BINDINGS = [Binding("escape", "cancel", "Back")]
    AUTO_FOCUS = "Input"  # the first field, not the scrolling box around it

    def __init__(self, title: str, subject: str | Text, fields: list[Field]) -> None:
        super().__init__()
        self.title_text = title
        self.subject = subject
        self.fields = fields

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog form"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.subject, classes="dialog-subject")
            for f in self.fields:
                yield Label(f.label + ("" if f.required else " (optional)"))
                yield Input(placeholder=f.placeholder, id=f"field-{f.name}", compact=True)
                if f.check is not None:
                    yield Static("", id=f"preview-{f.name}", classes="dialog-preview")
            yield Static("", id="form-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Continue", variant="primary", id="ok", compact=True)
                yield Button("Back", id="back", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._submit()
        else:
            self.dismiss(None)

    def on_input_changed(self, event: Input.Changed) -> None:
        """Show what a checked field's value means (or what is wrong with it) as it is typed."""
        name = (event.input.id or "").removeprefix("field-")
        f = next((f for f in self.fields if f.name == name), None)
        if f is None or f.check is None:
            return
        preview = self.query_one(f"#preview-{name}", Static)
        if not event.value.strip():
            preview.update("")
            return
        try:
            preview.update(f.check(event.value))
            preview.set_class(False, "dialog-error")
        except ValueError as exc:
            preview.update(str(exc))
            preview.set_class(True, "dialog-error")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter moves to the next empty field, and submits from the last one."""
        inputs = list(self.query(Input))
        later = inputs[inputs.index(event.input) + 1 :]
        empty = next((i for i in later if not i.value.strip()), None)
        if empty is not None:
            empty.focus()
        else:
            self._submit()

    def _submit(self) -> None:
        values = {
            f.name: self.query_one(f"#field-{f.name}", Input).value.strip() for f in self.fields
        }
        error = self.query_one("#form-error", Static)
        missing = [f.label for f in self.fields if f.required and not values[f.name]]
        if missing:
            error.update(f"Required: {', '.join(missing)}")
            return
        for f in self.fields:
            if f.check is not None and values[f.name]:
                try:
                    f.check(values[f.name])
                except ValueError as exc:
                    # What is wrong is under the field already (and again here if the clock
                    # made it wrong since): the line by the buttons says where to look.
                    preview = self.query_one(f"#preview-{f.name}", Static)
                    preview.update(str(exc))
                    preview.set_class(True, "dialog-error")
                    error.update(f"{f.label}: see above; nothing was done")
                    self.query_one(f"#field-{f.name}", Input).focus()
                    return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """The last look before a change: says plainly what will happen. ``y`` confirms."""

    AUTO_FOCUS = "#no"  # enter alone never confirms a change
    BINDINGS = [
        Binding("y", "answer(True)", "Yes, do it"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.message, id="confirm-message")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes, do it (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


# The tabs' row comes from the tabs themselves (flowledger.tui.panes.TABS): see help_text.
HELP = """\
# flowledger — keys (`escape` closes this)

| key | where | what |
|---|---|---|
| {tab_keys} | anywhere | {tab_names} |
| `g` | anywhere | go to an operation by its id or beginning; `down` / `up` picks one |
| `/` | lists | filter (`escape` back to the list); see below |
| `s` / `S` | queue | next sort column / reverse the order (or click a column header) |
| `enter` | queue | open the hold and the operation behind it |
| `enter` | other lists | the operation, the event's data, the execution and its n8n link |
| `h` | operation | open its first open hold |
| | hold | only the actions the selected hold allows are offered; another key says why |
| `c` | hold | confirm with evidence (receipt and note) |
| `r` | hold | release for retry (note; the write may happen twice if the evidence is wrong) |
| `x` | hold | cancel the operation (note) |
| `d` | hold | dismiss a non-blocking hold (note) |
| `p` | hold | approve again an approval that expired or names another version (note) |
| `m` | hold | allow one more attempt past max_attempts (note) |
| `a` | hold | assign an owner (note) |
| `e` | hold | extend the deadline: `+2h`, `18:00`, `9am`, `tomorrow 09:00` or ISO, UTC (note) |
| `n` | hold | add a note and the next action |
| `v` | events | verify the event chain |
| `H` | anywhere | write the handover report (Markdown) |
| `ctrl+r` | anywhere | refresh now (lists also refresh on their own) |
| `ctrl+p` | anywhere | command palette |
| `?` | anywhere | this help (`escape`, `q` or `?` closes it) |
| `q` | anywhere | quit (`escape` goes back from a detail or closes a dialog) |

The queue's filter takes words (all must match), `reason:` `owner:` `state:` `workflow:`
`op:` `source:` pairs, and `overdue` / `blocking`. The operations' filter takes a state
(`dispatching`, `state:failed`) and words found in the id, last execution, workflow or receipt.

An extension by `+2h` counts from the current deadline (from now once it has passed), and no
extension moves a deadline earlier. Where there is no filter (sources, a detail) the `/` key
only says so; every other key goes on working. The footer keeps `?`, `q`, `g` and `H` at its
right and shows as many of the screen's keys as fit; this list has all.

Every action asks for a note, asks again before it acts, and is recorded as an event under
your operator name. In read-only mode no action is offered.
"""


def help_text(tabs: Sequence[Tab]) -> str:
    """Every key, the tabs' own first."""
    return HELP.format(
        tab_keys=" ".join(f"`{tab.key}`" for tab in tabs),
        tab_names=", ".join(tab.name for tab in tabs),
    )


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, tabs: Sequence[Tab]) -> None:
        super().__init__()
        self.tabs = tabs

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Markdown(help_text(self.tabs))

    def action_close(self) -> None:
        self.dismiss(None)


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, split at the pipes that are not escaped (``\\|``)."""
    cells, cell, escaped = [], "", False
    for char in row.strip().removeprefix("|").removesuffix("|"):
        if char == "|" and not escaped:
            cells.append(cell.strip())
            cell = ""
            continue
        cell += char
        escaped = char == "\\" and not escaped
    return [*cells, cell.strip()]


def tables_as_lists(markdown: str) -> str:
    """``markdown`` with each table written as a list, one item a row (``header: cell; …``,
    empty cells left out): what a screen too narrow for the table's columns can show."""
    out: list[str] = []
    header: list[str] | None = None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            header = None
            out.append(line)
        elif header is None:
            header = _cells(line)
        elif not set(line) <= set("|-: "):  # not the line under the header
            pairs = zip(header, _cells(line), strict=False)
            out.append("- " + "; ".join(f"{h}: {c}" for h, c in pairs if c not in ("", "-")))
    return "\n".join(out) + ("\n" if markdown.endswith("\n") else "")


class ReportScreen(ModalScreen[None]):
    """The handover report as written, and where. Its tables are shown as lists: their six
    and seven columns, some of them long, are never readable in the box (at most 110 cells
    wide); the file keeps them as tables."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    def __init__(self, markdown: str, path: str) -> None:
        super().__init__()
        self.markdown = markdown
        self.path = path

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            # A Static wraps a long path where a Label would cut it at the box's edge.
            yield Static(
                f"Handover report written to {self.path}", classes="dialog-title", markup=False
            )
            yield Markdown(tables_as_lists(self.markdown))

    def action_close(self) -> None:
        self.dismiss(None)
