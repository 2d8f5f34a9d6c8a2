"""Keyset paging: reading a long, ordered set of rows a bounded batch at a time.

A batch starts where the last committed one ended, in the order of an index, instead of from
the beginning: a walk started anew every batch reads every row already passed again (the
figures are in ``bench/README.md``, section "Sweep"). :class:`Walk` pages a statement by its
columns; :class:`Listed` pages a list of ids read beforehand. Both move on only once their
batch has committed, so a batch that lost a race reads the same rows again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, Self

import sqlalchemy as sa


class Walk:
    """Where a walk over rows stands, in the order of ``columns`` (unique together, and the
    tail of an index after the statement's equality conditions). A batch reads the rows after
    the last committed batch's last row; the walk moves there only once that batch is
    committed (:meth:`advance`). :meth:`following` is the walk of the batch after this one's
    rows, for a batch that starts before this one has committed; ``on_page`` is told when a
    batch has read its rows."""

    def __init__(self, *columns: sa.ColumnElement[Any], at: tuple[Any, ...] | None = None) -> None:
        self.columns = columns
        self._at = at
        self._next = at
        self.limit = 0
        self.full = False
        self.on_page: Callable[[], None] | None = None

    def page(self, stmt: sa.Select[Any], limit: int) -> sa.Select[Any]:
        self.limit = limit
        stmt = stmt.order_by(*self.columns).limit(limit)
        if self._at is not None:
            at = (sa.literal(v, c.type) for v, c in zip(self._at, self.columns, strict=True))
            stmt = stmt.where(sa.tuple_(*self.columns) > sa.tuple_(*at))
        return stmt

    def saw(self, rows: Sequence[Any]) -> None:
        """The batch read ``rows`` of its :meth:`page` (selected with the walk's columns,
        under their names): the next starts after them, and a full page means more may
        wait."""
        if rows:
            self._next = tuple(getattr(rows[-1], str(c.key)) for c in self.columns)
        self.full = len(rows) == self.limit
        if self.on_page is not None:
            self.on_page()

    def advance(self) -> None:
        self._at = self._next

    def following(self) -> Walk:
        return Walk(*self.columns, at=self._next)


class Listed:
    """A walk over ids read beforehand, ``size`` at a time, in their order: what
    :class:`Walk` offers, for rows that are cheaper found in one read first. A batch's rows
    are the ids of :attr:`chunk`."""

    def __init__(self, ids: Sequence[str], size: int, *, at: int = 0) -> None:
        self.ids = ids
        self.size = size
        self._at = at
        self.on_page: Callable[[], None] | None = None

    @property
    def chunk(self) -> Sequence[str]:
        return self.ids[self._at : self._at + self.size]

    @property
    def full(self) -> bool:
        """More ids wait after this batch's."""
        return self._at + self.size < len(self.ids)

    def saw(self, rows: Sequence[Any]) -> None:
        if self.on_page is not None:
            self.on_page()

    def advance(self) -> None:
        self._at += self.size

    def following(self) -> Listed:
        return Listed(self.ids, self.size, at=self._at + self.size)


class Pages(Protocol):
    """What a walk's batches go through: a :class:`Walk` or a :class:`Listed`."""

    on_page: Callable[[], None] | None

    @property
    def full(self) -> bool: ...

    def saw(self, rows: Sequence[Any]) -> None: ...

    def advance(self) -> None: ...

    def following(self) -> Self: ...


def skip_locked(conn: sa.Connection, stmt: sa.Select[Any], of: sa.Table) -> sa.Select[Any]:
    """``stmt`` locking the rows it reads of ``of``, skipping those another transaction holds,
    on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serialises writers anyway."""
    if conn.dialect.name == "postgresql":
        return stmt.with_for_update(skip_locked=True, of=of)
    return stmt
