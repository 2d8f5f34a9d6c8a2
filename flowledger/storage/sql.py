"""Plain SQL for the driver: the writer's statements and the rows they read.

Statements are written once with ``:name`` placeholders (sqlite3's named style) and rewritten
to ``%(name)s`` for psycopg; the hot path speaks SQL to the driver's cursor rather than through
SQLAlchemy's statement compiler, which costs more than the database work itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from operator import itemgetter
from typing import Any

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@cache
def pyformat(sql: str, binary: bool = False) -> str:
    """``sql`` with psycopg's placeholders (``%(name)s``, or ``%(name)b`` sent in binary)."""
    return _NAMED.sub(r"%(\1)b" if binary else r"%(\1)s", sql.replace("%", "%%"))


@cache
def together(statements: tuple[str, ...], main: int) -> str:
    """The statements as one: each but ``main`` a ``WITH`` clause of it, the parameters of
    statement ``i`` renamed ``w{i}_name``."""
    renamed = [_NAMED.sub(rf":w{i}_\1", sql) for i, sql in enumerate(statements)]
    clauses = [f"w{i} AS ({sql})" for i, sql in enumerate(renamed) if i != main]
    return f"WITH {', '.join(clauses)} {renamed[main]}" if clauses else renamed[main]


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``IN (:name0, :name1, …)`` and its parameters, for SQL written by hand."""
    params = {f"{name}{i}": v for i, v in enumerate(values)}
    return f"IN ({', '.join(':' + key for key in params)})", params


class Row(dict[str, Any]):
    """A result row with attribute access."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@cache
def row_type(names: tuple[str, ...]) -> type[Row]:
    """A :class:`Row` whose columns ``names`` are properties, read without the failed lookup
    that ``__getattr__`` comes after (the hot path reads many columns of each row). A name
    that is already an attribute of a dict (``items``, ``values``…) stays that attribute, as
    on :class:`Row`."""
    columns = {n: property(itemgetter(n)) for n in names if not hasattr(Row, n)}
    return type("Row", (Row,), {"__slots__": (), **columns})
