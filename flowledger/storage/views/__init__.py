"""Read statements, one module per thing read. Each function takes a connection from the
store's reader (or the store) and returns rows or plain values; the shaping of what is read
(filters, pages, reports) is :mod:`flowledger.queries`'."""

from __future__ import annotations

from typing import Any, TypeAlias

import sqlalchemy as sa

# What a read takes: a connection of ``store.reader`` (or of a snapshot).
Connection: TypeAlias = sa.Connection


def row_dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def like_pattern(text: str) -> str:
    """``%text%`` for a LIKE with ``\\`` as its escape, the text lowered and taken literally."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def contains(column: Any, text: str) -> Any:
    """``column`` (NULL as empty) holds ``text``, whatever the case."""
    return sa.func.lower(sa.func.coalesce(column, "")).like(like_pattern(text), escape="\\")
