"""The kept executions as the person on duty looks for them: searches by words, the copies
a hold or an operation names, the dispatches an execution made, and where each source's
tool shows an execution."""

from __future__ import annotations

from typing import Any

from flowledger.queries.records import list_sources
from flowledger.storage.engine import Store
from flowledger.storage.views import attempts
from flowledger.storage.views import executions as copies


def search_executions(
    store: Store, *, text: str = "", after_id: int | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Kept executions, most recently started first (queued ones by when the ledger first saw
    them) as the CLI lists them, ``gone`` ones included; the word ``gone`` keeps only those.
    Keyset paging: pass the last row's ``id`` as ``after_id`` for the next page."""
    words = text.split()
    gone = any(word.lower() == "gone" for word in words)
    words = [word for word in words if word.lower() != "gone"]
    with store.reader.connect() as conn:
        return copies.search(conn, words, gone=gone, after=after_id, limit=limit)


def executions_by_ref(
    store: Store, external_ids: list[str], source: str | None = None
) -> list[dict[str, Any]]:
    """The kept copies of the executions named (a hold may name one without an operation),
    only ``source``'s when it is known."""
    if not external_ids:
        return []
    with store.reader.connect() as conn:
        return copies.by_refs(conn, external_ids, source)


def attempts_by_execution(
    store: Store, external_id: str, source: str | None = None, *, limit: int = 100
) -> list[dict[str, Any]]:
    """The dispatches an execution made (the ``attempts.execution_id`` index), newest first,
    with their operation's state now."""
    with store.reader.connect() as conn:
        return attempts.by_execution(conn, external_id, source, limit=limit)


def source_urls(store: Store) -> dict[str, tuple[str, str | None]]:
    """Each source's kind and base URL, to link an execution to the tool's own page."""
    return {s["name"]: (s["kind"], s["base_url"]) for s in list_sources(store)}
