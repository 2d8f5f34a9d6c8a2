"""Every read of the ledger, one module per thing read: its statements and the shapes its
readers want (filters, pages, windowed searches, checks of the chain and the tree). A function
that takes the store opens a reader's connection itself; one that takes a connection reads
inside a read that is already open (one snapshot for several reads). What is built from
several reads for someone outside (the handover report, the metrics) is
:mod:`flowledger.reports`'."""

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
