"""Plain SQL for the driver: the writer's statements and the rows they read.

Statements are written once with ``:name`` placeholders (sqlite3's named style) and rewritten
to ``%(name)s`` for psycopg and to ``?`` for sqlite3, which binds by position for less; the hot
path speaks SQL to the driver's cursor rather than through SQLAlchemy's statement compiler,
which costs more than the database work itself. So a ``:name`` is a placeholder wherever it
stands: never one in a string literal or a comment of these statements.

Each rewrite is kept for the statements used most (:data:`KEPT`): a statement built for its
values (``in_list``) makes one of each length it is built with.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from operator import itemgetter
from typing import Any

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
KEPT = 512  # statements whose rewrite is kept


@lru_cache(maxsize=KEPT)
def pyformat(sql: str, binary: bool = False) -> str:
    """``sql`` with psycopg's placeholders (``%(name)s``, or ``%(name)b`` sent in binary)."""
    return _NAMED.sub(r"%(\1)b" if binary else r"%(\1)s", sql.replace("%", "%%"))


@lru_cache(maxsize=KEPT)
def qmark(sql: str) -> tuple[str, Callable[[Mapping[str, Any]], tuple[Any, ...]]]:
    """``sql`` with sqlite3's positional placeholders (``?``), and what takes its parameters
    out of a mapping in their order: sqlite3 binds a named parameter by asking the statement
    its name and looking it up, which costs about twice as much as binding by position
    (``bench/README.md``, "Plain SQL to the driver")."""
    names = tuple(_NAMED.findall(sql))
    positional = _NAMED.sub("?", sql)
    if len(names) > 1:
        return positional, itemgetter(*names)
    if names:
        (name,) = names
        return positional, lambda params: (params[name],)
    return positional, lambda params: ()


Params = Mapping[str, Any] | Sequence[Any]


def bound(sql: str, params: Params | None) -> tuple[str, Params]:
    """``sql`` and ``params`` as sqlite3 binds them: a dict's by position (:func:`qmark`),
    anything else as it is; a name missing from the dict is refused as sqlite3 refuses it."""
    if not isinstance(params, dict):
        return sql, params or ()
    positional, values = qmark(sql)
    try:
        return positional, values(params)
    except KeyError as exc:
        message = f"You did not supply a value for binding parameter :{exc.args[0]}."
        raise sqlite3.ProgrammingError(message) from None


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
