"""Statements written with ``:name`` placeholders, bound by position on SQLite
(:func:`flowledger.storage.sql.bound`): the same rows as sqlite3's binding by name."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest

from flowledger.storage.sql import Row, bound, qmark

INSERT = "INSERT INTO t (a, b, c) VALUES (:a, :b, :a || :c)"


def test_names_become_question_marks_in_their_order_repeats_included() -> None:
    sql, values = qmark(INSERT)
    assert sql == "INSERT INTO t (a, b, c) VALUES (?, ?, ? || ?)"
    assert values({"c": 3, "b": 2, "a": 1, "unused": 0}) == (1, 2, 1, 3)


@pytest.mark.parametrize(
    ("sql", "params", "expected"),
    [
        ("SELECT 1", None, ("SELECT 1", ())),
        ("SELECT 1", {}, ("SELECT 1", ())),
        ("SELECT ?", (5,), ("SELECT ?", (5,))),  # positional already: as given
        ("SELECT ?, ?", [5, 6], ("SELECT ?, ?", [5, 6])),
        ("SELECT :x", {"x": None}, ("SELECT ?", (None,))),  # one name: still a tuple
        ("SELECT :x", Row(x=7), ("SELECT ?", (7,))),  # a row of another statement
        ("SELECT x::text, :y", {"y": 1}, ("SELECT x::text, ?", (1,))),  # a cast, not a name
    ],
)
def test_what_is_bound(sql: str, params: Any, expected: tuple[str, Any]) -> None:
    assert bound(sql, params) == expected


def test_a_missing_name_is_refused_as_sqlite3_refuses_it() -> None:
    with (
        closing(sqlite3.connect(":memory:")) as conn,
        pytest.raises(sqlite3.ProgrammingError) as by_name,
    ):
        conn.execute("SELECT :a, :b", {"a": 1})
    with pytest.raises(sqlite3.ProgrammingError) as by_position:
        bound("SELECT :a, :b", {"a": 1})
    assert str(by_position.value) == str(by_name.value)


def test_the_database_holds_the_same_rows_either_way() -> None:
    rows = [
        {"a": "x", "b": 1, "c": "é\x00"},
        {"a": None, "b": 2.5, "c": "z"},
        {"a": "", "b": b"\xff\x00", "c": ""},
        {"a": "longer text " * 50, "b": -(2**63), "c": "🙂"},
    ]
    held = []
    for how in ("name", "position"):
        with closing(sqlite3.connect(":memory:")) as conn:
            conn.execute("CREATE TABLE t (a, b, c)")
            for row in rows:
                if how == "name":
                    conn.execute(INSERT, row)
                else:
                    conn.execute(*bound(INSERT, row))
            held.append(conn.execute("SELECT a, b, c, typeof(b) FROM t ORDER BY rowid").fetchall())
    assert held[0] == held[1]
    assert len(held[0]) == len(rows)
