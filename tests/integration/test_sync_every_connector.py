"""The sync service behaves the same whichever connector feeds it (every registered kind)."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.config import SourceConfig
from flowledger.connectors import registry
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.reads.execution_copies import list_executions
from flowledger.sync import sync_source
from tests.support.builders import FakeClock
from tests.support.fakes import EVERY_KIND, fake_for
from tests.support.fakes.n8n import KEY


@pytest.fixture(params=EVERY_KIND)
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TEST_API_KEY", KEY)
    return fake_for(request.param)


def sync(ledger: Ledger, fake: Any, **kw: Any) -> Any:
    cfg = SourceConfig(
        name="tool",
        kind=fake.kind,
        base_url=fake.base_url,
        api_key_env="TEST_API_KEY" if registry.KINDS[fake.kind].needs_api_key else None,
        page_size=40,
    )
    return sync_source(ledger, cfg, fake.client(), sleep=lambda s: None, **kw)


def kept(store: Store) -> dict[str, dict[str, Any]]:
    return {r["external_id"]: r for r in list_executions(store, limit=1000)}


def test_backfill_increment_refresh_and_prune_keep_every_copy(
    ledger: Ledger, store: Store, clock: FakeClock, fake: Any
) -> None:
    fake.add(90)
    (running,) = fake.add(1, status="running")
    fake.add(9)
    first = sync(ledger, fake)
    assert first.ok and set(kept(store)) == fake.ids()
    assert kept(store)[running]["final"] is False

    clock.advance(minutes=1)
    new = fake.add(5)
    fake.set_status(running, "success")
    second = sync(ledger, fake)
    assert second.ok and second.new == 5 and set(new) <= set(kept(store))
    assert kept(store)[running]["status"] == "success" and kept(store)[running]["final"]

    clock.advance(hours=2)
    pruned = fake.prune(30)
    third = sync(ledger, fake)
    assert third.ok and third.reconciled and third.gone == 30
    copies = kept(store)
    assert len(copies) == 105
    assert {i for i, c in copies.items() if c["gone_at"] is not None} == set(pruned)
