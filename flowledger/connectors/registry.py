"""Connectors by kind: the one place that knows which class reads which tool."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from flowledger.connectors.airflow import AirflowConnector
from flowledger.connectors.base import Connector, Settings
from flowledger.connectors.n8n import N8nConnector

Factory = Callable[[httpx.Client, Settings], Connector]

KINDS: dict[str, Factory] = {
    "n8n": N8nConnector,
    "airflow": AirflowConnector,
}


def build(kind: str, client: httpx.Client, settings: Settings) -> Connector:
    try:
        factory = KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(KINDS))
        raise ValueError(f"unknown source kind {kind!r} (known: {known})") from None
    return factory(client, settings)
