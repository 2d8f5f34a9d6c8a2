"""A list's columns take what their rows need and leave the rest to the id."""

from __future__ import annotations

from typing import Any

from flowledger.tui.format import middle
from flowledger.tui.panes.columns import Cell, Columns


class Ids(Columns):
    COLUMNS = [("id", "operation"), ("owner", "owner"), ("state", "state")]
    WIDTHS = {"owner": 12, "state": 11}
    FLEX = ("id", 10, 40)
    DROP = ("owner",)

    def __init__(self) -> None:
        self.widths = self.widest()
        self.needed = {}

    def cells(self, row: dict[str, Any]) -> list[Cell]:
        return [middle(row["id"], self.widths["id"]), row["owner"], row["state"]]


ROWS = [{"id": "demo:invoice:INV-1095:send", "owner": "-", "state": "dispatching"}]


def test_before_any_row_every_fixed_column_keeps_its_width() -> None:
    keys, widths = Ids().fit(60)
    assert keys == ["id", "owner", "state"]
    assert widths == {"owner": 12, "state": 11, "id": 58 - (14 + 13 + 2)}


def test_a_column_takes_what_its_rows_need_but_never_less_than_its_label() -> None:
    columns = Ids()
    columns.measure(ROWS)
    _, widths = columns.fit(60)
    assert widths["owner"] == len("owner")  # its rows hold "-"
    assert widths["state"] == len("dispatching")
    assert widths["id"] == 58 - (7 + 13 + 2)  # the id gets what the owner left
    assert widths["id"] >= len(ROWS[0]["id"])


def test_a_longer_row_widens_its_column_again() -> None:
    columns = Ids()
    columns.measure(ROWS)
    columns.measure([{**ROWS[0], "owner": "carol.night"}])
    assert columns.fit(60)[1]["owner"] == len("carol.night")
    columns.measure(ROWS, anew=True)  # a reload measures its rows anew
    assert columns.fit(60)[1]["owner"] == len("owner")
