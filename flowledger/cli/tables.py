"""Listings for people: columns sized by rich, printed as plain text.

No colour and no box drawing, and as wide as the rows need when stdout is not a terminal, so
piped output keeps one row a line for ``grep`` and ``awk`` and never breaks an id. In a terminal
a row that is too wide folds inside its columns; nothing is cut. A listing that names its
columns of free text (``free``) breaks no word elsewhere: the other columns are at least as
wide as their longest word, and the columns it may do without (``drop``) are left out, in
order, while the rest do not fit.

Text from the ledger is never read as markup, and its control and bidi characters are shown
escaped (``\\x1b``, ``\\u202e``, by :func:`flowledger.domain.display.visible`), so a workflow
name or an error cannot move the cursor, recolour the terminal or reorder what it says.
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
FREE_MIN = 20  # the narrowest a column of free text gets while words elsewhere stay whole


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
    free: Collection[int] | None = None,
    drop: Sequence[int] = (),
) -> str:
    """Rows as aligned columns two spaces apart under a header in capitals (every listing's
    one style); ``right`` names the columns (by index) to align right, ``indent`` the spaces
    before every line. ``None`` is shown as ``-``. Given ``free`` (the columns of free text,
    which may fold anywhere), no word of another column is broken: ``drop`` names the columns
    to leave out, first first, while the others do not fit the width."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.table import Column, Table
    from rich.text import Text

    texts = [[printable(cell) for cell in row] for row in rows]
    count = len(header) if header is not None else max((len(r) for r in texts), default=0)
    titles = [h.upper() for h in header] if header is not None else [""] * count
    width = _width()
    widths: dict[int, int | None] = dict.fromkeys(range(count))
    if free is not None and width < PIPED_WIDTH:
        widths = _whole_words(titles, texts, width - indent, set(free), drop)
    body = [[Text(row[i] if i < len(row) else "") for i in widths] for row in texts]
    table = Table(
        *(
            Column(
                titles[i],
                justify="right" if i in right else "left",
                overflow="fold",
                width=w,
            )
            for i, w in widths.items()
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
        width=width,
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


def _whole_words(
    titles: list[str], texts: list[list[str]], room: int, free: set[int], drop: Sequence[int]
) -> dict[int, int | None]:
    """The columns kept and their widths (``None``: as rich sizes it) so that no word outside
    ``free`` is broken in ``room`` columns: each such column at least as wide as its longest
    word, each free one at least :data:`FREE_MIN`; the columns of ``drop`` left out in order
    while that does not fit. When even that cannot fit (an id longer than the terminal), rich
    folds the columns kept as it would."""
    from rich.cells import cell_len

    def cells(i: int) -> list[str]:
        return [titles[i], *(row[i] for row in texts)]

    word = {
        i: max(cell_len(w) for c in cells(i) for w in c.split() or [""]) for i in range(len(titles))
    }
    whole = {
        i: max(max(cell_len(line) for line in c.splitlines() or [""]) for c in cells(i))
        for i in range(len(titles))
    }
    kept = list(range(len(titles)))

    def need(widths: dict[int, int]) -> int:
        return sum(widths.values()) + 2 * (len(widths) - 1)

    if need({i: whole[i] for i in kept}) <= room:
        return dict.fromkeys(kept)
    least = {i: FREE_MIN if i in free else word[i] for i in kept}
    for column in drop:
        if need(least) <= room:
            break
        kept.remove(column)
        del least[column]
    if need(least) > room:
        return dict.fromkeys(kept)
    widths = dict(least)
    loose = [i for i in kept if i in free]
    # What is left over: the other columns grow towards their whole width, in order, with half
    # of it when there is free text (all of it when not); the free columns share the rest.
    budget = (room - need(widths)) // (2 if loose else 1)
    for i in (i for i in kept if i not in free):
        grown = min(whole[i] - widths[i], budget)
        widths[i] += grown
        budget -= grown
    for n, i in enumerate(loose):
        widths[i] += (room - need(widths)) // (len(loose) - n)
    shown: dict[int, int | None] = dict(widths)
    return shown


def echo_table(
    rows: Iterable[Sequence[object]],
    *,
    header: Sequence[str] | None = None,
    indent: int = 0,
    right: Collection[int] = (),
    free: Collection[int] | None = None,
    drop: Sequence[int] = (),
) -> None:
    """Print :func:`render`'s text on stdout (nothing for no rows and no header)."""
    text = render(rows, header=header, indent=indent, right=right, free=free, drop=drop)
    if text:
        typer.echo(text)


def _width() -> int:
    if not sys.stdout.isatty():
        return PIPED_WIDTH
    from rich.console import Console

    return Console(file=sys.stdout).width
