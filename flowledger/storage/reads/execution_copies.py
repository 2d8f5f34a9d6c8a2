"""The kept execution copies as the API, the CLI and the person on duty look for them: pages
most recently started first (keyset paged), searches by words, the copies a hold or an
operation names (with how each is linked), pages by id for the API, the dispatches an
execution made, and where each source's tool shows an execution."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Attempt, Event, Execution, Operation, table
from flowledger.storage.problems import Missing
from flowledger.storage.reads import Connection, contains, row_dict, sources

EXECUTIONS = table(Execution)
ATTEMPTS = table(Attempt)
EVENTS = table(Event)
OPS = table(Operation)
# How an execution is linked to an operation, the most direct first: its id is on one of the
# operation's attempts, it retried (up the ``retryOf`` chain) an execution that is, or it
# declared the operation itself (n8n ``customData``). The last two are the sync's
# ``execution_linked`` events (``flowledger.sync.links``).
LINKED_VIA = ("attempt", "retry_of", "custom_data")
# An operation's links read at most: one per execution, a handful in practice.
MAX_LINKS = 1000
_WORD_COLUMNS = (
    EXECUTIONS.c.external_id,
    EXECUTIONS.c.workflow_id,
    EXECUTIONS.c.workflow_name,
    EXECUTIONS.c.status,
    EXECUTIONS.c.source,
)

# Executions are listed most recently started first (queued ones by when the ledger first saw
# them): the order of the index ix_executions_started, read backwards.
EXECUTION_TIME = sa.func.coalesce(EXECUTIONS.c.started_at, EXECUTIONS.c.first_seen_at)
EXECUTIONS_ORDER = (EXECUTION_TIME.desc(), EXECUTIONS.c.id.desc())


def _after(conn: Connection, stmt: Any, after: int) -> Any:
    """``stmt`` (in :data:`EXECUTIONS_ORDER`) from the execution after ``after`` on; None
    when ``after`` is not there. The time's own bound lets SQLite start the page inside the
    index: it reads a row value over an expression index as no range at all."""
    anchor = conn.execute(sa.select(EXECUTION_TIME).where(EXECUTIONS.c.id == after)).first()
    if anchor is None:
        return None
    return stmt.where(
        anchor[0] >= EXECUTION_TIME,
        sa.tuple_(EXECUTION_TIME, EXECUTIONS.c.id) < sa.tuple_(anchor[0], after),
    )


def _exists(conn: Connection, row_id: int) -> bool:
    """A kept copy has the row id ``row_id``."""
    found = conn.execute(sa.select(EXECUTIONS.c.id).where(EXECUTIONS.c.id == row_id)).first()
    return found is not None


def _rows(conn: Connection, stmt: Any, after: int | None) -> list[dict[str, Any]]:
    if after is not None:
        stmt = _after(conn, stmt, after)
        if stmt is None:
            return []
    return [row_dict(r) for r in conn.execute(stmt)]


def _filtered(stmt: Any, source: str | None, status: str | None, gone: bool | None) -> Any:
    """``stmt`` narrowed to a source, a status and present or pruned copies, each if given."""
    if source is not None:
        stmt = stmt.where(EXECUTIONS.c.source == source)
    if status is not None:
        stmt = stmt.where(EXECUTIONS.c.status == status)
    if gone is True:
        stmt = stmt.where(EXECUTIONS.c.gone_at.is_not(None))
    elif gone is False:
        stmt = stmt.where(EXECUTIONS.c.gone_at.is_(None))
    return stmt


def _named(refs: Iterable[tuple[str | None, str]]) -> list[Any]:
    """A condition for each ``(source, execution_id)`` pair: without a source, that id from
    any source."""
    return [
        sa.and_(EXECUTIONS.c.external_id == e, *([EXECUTIONS.c.source == s] if s else []))
        for s, e in sorted(refs, key=lambda r: (r[0] or "", r[1]))
    ]


def linked_to(conn: Connection, operation_id: str) -> list[dict[str, Any]]:
    """The copies of the executions linked to the operation, each once, oldest first, with
    ``linked_via``: the most direct of the ways it is linked (:data:`LINKED_VIA`). An
    attempt that names no source matches that id from any source."""
    refs: dict[tuple[str | None, str], str] = {}

    def add(source: str | None, external_id: str | None, via: str) -> None:
        if external_id is None or via not in LINKED_VIA:
            return
        known = refs.get((source, external_id))
        if known is None or LINKED_VIA.index(via) < LINKED_VIA.index(known):
            refs[(source, external_id)] = via

    tried = conn.execute(
        sa.select(ATTEMPTS.c.source, ATTEMPTS.c.execution_id).where(
            ATTEMPTS.c.operation_id == operation_id
        )
    )
    for source, external_id in tried:
        add(source, external_id, "attempt")
    links = conn.execute(
        sa.select(EVENTS.c.data)
        .where(EVENTS.c.operation_id == operation_id, EVENTS.c.kind == "execution_linked")
        .order_by(EVENTS.c.seq)
        .limit(MAX_LINKS)
    ).scalars()
    for data in links:
        d = json.loads(data)
        add(d.get("source"), d.get("execution_id"), d.get("via"))
    if not refs:
        return []
    copies = conn.execute(
        sa.select(EXECUTIONS).where(sa.or_(*_named(refs))).order_by(EXECUTION_TIME, EXECUTIONS.c.id)
    )
    out = []
    for row in copies:
        ways = [refs.get((row.source, row.external_id)), refs.get((None, row.external_id))]
        via = min((w for w in ways if w is not None), key=LINKED_VIA.index)
        out.append({**row_dict(row), "linked_via": via})
    return out


def by_id(
    store: Store,
    *,
    source: str | None = None,
    status: str | None = None,
    gone: bool | None = None,
    after: int | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Copies by row id, ``limit`` after the id ``after`` (the API's order)."""
    stmt = _filtered(
        sa.select(EXECUTIONS).order_by(EXECUTIONS.c.id).limit(limit), source, status, gone
    )
    if after is not None:
        stmt = stmt.where(EXECUTIONS.c.id > after)
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def list_executions(
    store: Store,
    *,
    source: str | None = None,
    status: str | None = None,
    gone: bool | None = None,
    after: int | None = None,
    limit: int = 100,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """The kept execution copies, most recently started first (queued ones by when the
    ledger first saw them), ``limit`` at a time. Keyset paging: pass the last row's ``id`` as
    ``after`` for the next page. ``gone``: ``True`` only copies the tool no longer has,
    ``False`` only those it still has. ``since``: only those started (or first seen) at or
    after it. An ``after`` that is no row is :class:`Missing`."""
    stmt = sa.select(EXECUTIONS).order_by(*EXECUTIONS_ORDER).limit(max(1, min(limit, 1000)))
    if since is not None:
        stmt = stmt.where(since <= EXECUTION_TIME)
    with store.reader.connect() as conn:
        found = _rows(conn, _filtered(stmt, source, status, gone), after)
        if not found and after is not None and not _exists(conn, after):
            raise Missing(f"no execution row {after} to continue after")
    return found


def search_executions(
    store: Store, *, text: str = "", after_id: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Kept executions, most recently started first (queued ones by when the ledger first saw
    them) as the CLI lists them, ``gone`` ones included; the word ``gone`` keeps only those,
    and every other word must be in their id, workflow, status or source. Keyset paging: pass
    the last row's ``id`` as ``after_id`` for the next page."""
    words = text.split()
    gone = any(word.lower() == "gone" for word in words)
    stmt = sa.select(EXECUTIONS).order_by(*EXECUTIONS_ORDER).limit(limit)
    if gone:
        stmt = stmt.where(EXECUTIONS.c.gone_at.is_not(None))
    for word in (word for word in words if word.lower() != "gone"):
        stmt = stmt.where(sa.or_(*(contains(col, word) for col in _WORD_COLUMNS)))
    with store.reader.connect() as conn:
        return _rows(conn, stmt, after_id)


def executions_by_ref(
    store: Store, external_ids: list[str], source: str | None = None
) -> list[dict[str, Any]]:
    """The kept copies of the executions named (a hold may name one without an operation),
    only ``source``'s when it is known."""
    if not external_ids:
        return []
    stmt = sa.select(EXECUTIONS).where(EXECUTIONS.c.external_id.in_(list(external_ids)))
    if source is not None:
        stmt = stmt.where(EXECUTIONS.c.source == source)
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt.order_by(EXECUTIONS.c.id))]


def attempts_by_execution(
    store: Store, external_id: str, source: str | None = None, *, limit: int = 100
) -> list[dict[str, Any]]:
    """The dispatches an execution made (the ``attempts.execution_id`` index), newest first,
    with their operation's state now; an attempt that names no source matches any."""
    stmt = (
        sa.select(ATTEMPTS, OPS.c.state.label("operation_state"))
        .join(OPS, OPS.c.operation_id == ATTEMPTS.c.operation_id)
        .where(ATTEMPTS.c.execution_id == external_id)
        .order_by(ATTEMPTS.c.dispatched_at.desc(), ATTEMPTS.c.id.desc())
        .limit(limit)
    )
    if source is not None:
        stmt = stmt.where(sa.or_(ATTEMPTS.c.source.is_(None), ATTEMPTS.c.source == source))
    with store.reader.connect() as conn:
        return [row_dict(r) for r in conn.execute(stmt)]


def source_urls(store: Store) -> dict[str, tuple[str, str | None]]:
    """Each source's kind and base URL, to link an execution to the tool's own page."""
    with store.reader.connect() as conn:
        return {s.name: (s.kind, s.base_url) for s in sources.by_name(conn)}
