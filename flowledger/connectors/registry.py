"""Connectors by kind: the one place that knows which kinds of tool there are. Everything else
asks a kind's :class:`~flowledger.connectors.base.Kind` (adding a kind is its connector module
and one line here)."""

from __future__ import annotations

import httpx

from flowledger.connectors import airflow, n8n, prefect
from flowledger.connectors.base import Connector, Kind, Settings

KINDS: dict[str, Kind] = {kind.name: kind for kind in (n8n.KIND, airflow.KIND, prefect.KIND)}


def get(name: str) -> Kind:
    """The kind called ``name``; a ``ValueError`` naming the known ones when there is none."""
    try:
        return KINDS[name]
    except KeyError:
        known = ", ".join(sorted(KINDS))
        raise ValueError(f"unknown source kind {name!r} (known: {known})") from None


def build(kind: str, client: httpx.Client, settings: Settings) -> Connector:
    return get(kind).build(client, settings)


def execution_url(
    kind: str | None, base_url: str | None, workflow_id: str | None, execution_id: str
) -> str | None:
    """The tool's own page for an execution, when its kind has one and its source a base URL."""
    known = KINDS.get(kind) if kind else None
    if known is None or known.execution_page is None or not base_url:
        return None
    return known.execution_page(base_url, workflow_id, execution_id)
