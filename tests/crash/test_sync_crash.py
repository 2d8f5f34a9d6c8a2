"""SIGKILL in the middle of a multi-page sync, then sync again: no gap and no duplicate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.reads import chain
from flowledger.sync import sync_source
from tests.crash.sync_child import ENV, source
from tests.support.fakes.n8n import KEY, FakeN8n
from tests.support.processes import kill_module_at

COUNT, PAGE = 1000, 100


@pytest.mark.crash
@pytest.mark.parametrize(
    ("point", "kept"),
    [("sync_page_3_before_commit", 2 * PAGE), ("sync_page_3_committed", 3 * PAGE)],
)
def test_sync_killed_between_pages_resumes_without_gap_or_duplicate(
    db_url: str, store: Store, tmp_path: Path, point: str, kept: int
) -> None:
    store.dispose()
    kill_module_at(
        point,
        ["tests.crash.sync_child", db_url, str(COUNT), str(PAGE)],
        {**os.environ, ENV: KEY},
        tmp_path,
    )

    store = open_store(db_url)
    try:
        with store.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM executions")).scalar_one() == kept
        fake = FakeN8n()
        fake.add(COUNT)
        os.environ[ENV] = KEY
        try:
            report = sync_source(Ledger(store), source(PAGE), fake.client(), sleep=lambda s: None)
        finally:
            del os.environ[ENV]
        assert report.ok and report.new == COUNT - kept
        assert len(fake.list_requests()) == COUNT // PAGE - kept // PAGE  # resumed, not restarted
        with store.engine.connect() as conn:
            ids = conn.execute(sa.text("SELECT external_id FROM executions")).scalars().all()
            assert sorted(ids, key=int) == [str(i) for i in range(1, COUNT + 1)]
            assert chain.verify(conn).ok
    finally:
        store.dispose()
