"""Listings for people: columns sized by rich, printed as plain text.

No colour and no box drawing, and as wide as the rows need when stdout is not a terminal, so
piped output keeps one row a line for ``grep`` and ``awk`` and never breaks an id. In a terminal
a row that is too wide folds inside its columns; nothing is cut. Text from the ledger is never
read as markup, and its control and bidi characters are shown escaped (``\\x1b``, ``\\u202e``,
by :func:`flowledger.domain.display.visible`), so a workflow name or an error cannot move the
cursor, recolour the terminal or reorder what it says.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

import typer

from flowledger.domain.display import visible
from flowledger.domain.times import for_people

PIPED_WIDTH = 1_000_000  # wider than any row: piped output is never wrapped


def printable(value: object) -> str:
    """``value`` as text with its control and bidi characters written as escapes."""
    return visible(value)


def when(value: object) -> str:
    """A time as people read it (``2026-11-02 08:00:00 UTC``), ``-`` for none."""
    return for_people(value) if isinstance(value, datetime) else "-"


def render(
    rows: Iterable[Sequence[object]],
    *,
    header: Sequence[str] | None = None,
    indent: int = 0,
    right: Collection[int] = (),
) -> str:
    """Rows as aligned columns two spaces apart under a header in capitals (every listing's
    one style); ``right`` names the columns (by index) to align right, ``indent`` the spaces
    before every line. ``None`` is shown as ``-``."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Column, Table
    from rich.text import Text

    body = [[Text(printable(cell)) for cell in row] for row in rows]
    count = len(header) if header is not None else max((len(r) for r in body), default=0)
    table = Table(
        *(
            Column(
                header[i].upper() if header is not None else "",
                justify="right" if i in right else "left",
                overflow="fold",
            )
            for i in range(count)
        ),
        box=None,
        show_header=header is not None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
    )
    for row in body:
        table.add_row(*row)
    out = io.StringIO()
    console = Console(
        file=out,
        width=_width(),
        color_system=None,
        force_terminal=False,
        force_jupyter=False,
        force_interactive=False,
        legacy_windows=False,
        markup=False,
        emoji=False,
        highlight=False,
    )
    console.print(Padding(table, (0, 0, 0, indent), expand=False) if indent else table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def echo_table(
    rows: Iterable[Sequence[object]],
    *,
    header: Sequence[str] | None = None,
    indent: int = 0,
    right: Collection[int] = (),
) -> None:
    """Print :func:`render`'s text on stdout (nothing for no rows and no header)."""
    text = render(rows, header=header, indent=indent, right=right)
    if text:
        typer.echo(text)


def _width() -> int:
    if not sys.stdout.isatty():
        return PIPED_WIDTH
    from rich.console import Console

    return Console(file=sys.stdout).width
