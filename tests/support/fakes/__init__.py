"""A fake of every tool a connector reads, by kind: the contract tests run each registered
kind against its fake, so a kind added without one fails there rather than going untested."""

from __future__ import annotations

import pytest

from flowledger.connectors import registry
from tests.support.fakes.airflow import FakeAirflow
from tests.support.fakes.n8n import FakeN8n
from tests.support.fakes.prefect import FakePrefect
from tests.support.fakes.tool import FakeTool

FAKES: dict[str, type[FakeTool]] = {fake.kind: fake for fake in (FakeN8n, FakeAirflow, FakePrefect)}
# One parameter per registered kind, named for it.
EVERY_KIND = [pytest.param(kind, id=kind) for kind in registry.KINDS]


def fake_for(kind: str) -> FakeTool:
    """A fresh fake of ``kind``'s tool."""
    if kind not in FAKES:
        raise LookupError(f"no fake tool for kind {kind!r}: add one to tests/support/fakes")
    return FAKES[kind]()
