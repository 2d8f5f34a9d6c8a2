"""How a list's columns fit the width it has: each fixed column takes what its rows need (up to
its widest, never under its label), one column takes what is left, and columns are dropped in
a set order while the rest does not fit."""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text

Cell = str | Text


class Columns:
    """A list's columns. Subclasses name them and draw a row's cells (:meth:`cells`) within
    ``widths``; :meth:`measure` notes what the rows loaded need and :meth:`fit` lays the
    columns out for a width."""

    COLUMNS: list[tuple[str, str]] = []  # (key, label)
    # For a pane that fits its width: each column's widest (cells are fitted to it; a column
    # whose rows are all narrower takes only what they need, and never less than its label),
    # the one column that takes what is left (between its bounds), and the columns dropped,
    # first to last, while the rest does not fit.
    WIDTHS: dict[str, int] = {}
    FLEX: tuple[str, int, int] | None = None  # (key, narrowest, widest)
    DROP: tuple[str, ...] = ()
    # Columns are dropped while the flexible one would be narrower than this (its narrowest
    # when unset); once it is at its widest, what is left goes to REST, if shown.
    COMFORTABLE = 0
    REST: str | None = None

    widths: dict[str, int]
    needed: dict[str, int]  # each column's widest cell among the rows loaded

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        raise NotImplementedError

    def widest(self) -> dict[str, int]:
        widths = dict(self.WIDTHS)
        if self.FLEX is not None:
            widths[self.FLEX[0]] = self.FLEX[2]
        return widths

    def measure(self, rows: list[dict[str, Any]], *, anew: bool = False) -> None:
        """Note each column's widest cell among ``rows`` (drawn at the column's widest)."""
        if anew:
            self.needed = {}
        shown, self.widths = self.widths, self.widest()
        try:
            for row in rows:
                for (key, _), cell in zip(self.COLUMNS, self.cells(row), strict=True):
                    drawn = cell_len(cell.plain if isinstance(cell, Text) else cell)
                    self.needed[key] = max(self.needed.get(key, 0), drawn)
        finally:
            self.widths = shown

    def _fixed_width(self, key: str, label: str) -> int:
        """A fixed column's width: what its rows need, within its widest, never under its
        label (the rest column keeps its widest: it takes what is left anyway)."""
        widest = self.WIDTHS[key]
        if key == self.REST or key not in self.needed:
            return widest
        return min(widest, max(cell_len(label), self.needed[key]))

    def fit(self, width: int) -> tuple[list[str], dict[str, int]]:
        """The columns shown in ``width`` cells, and their widths."""
        keys = [key for key, _ in self.COLUMNS]
        if self.FLEX is None:
            return keys, dict(self.WIDTHS)
        flex, narrowest, widest = self.FLEX
        sized = {k: self._fixed_width(k, label) for k, label in self.COLUMNS if k in self.WIDTHS}
        wanted = max(narrowest, self.COMFORTABLE)
        room = width - 2  # the vertical scrollbar
        drop = list(self.DROP)
        while True:
            fixed = sum(sized[k] + 2 for k in keys if k != flex) + 2
            if room - fixed >= wanted or not drop:
                break
            keys.remove(drop.pop(0))
        widths = {**sized, flex: max(narrowest, min(widest, room - fixed))}
        if self.REST in keys:
            widths[self.REST] += max(0, room - fixed - widths[flex])
        return keys, widths
