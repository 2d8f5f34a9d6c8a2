"""Run one sync of a fake n8n into a ledger; the crash test kills it at a named point.

``python -m tests.crash.sync_child DB_URL COUNT PAGE_SIZE``
"""

from __future__ import annotations

import sys

from flowledger.config import SourceConfig
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store
from flowledger.sync import sync_source
from tests.support.fakes.n8n import FakeN8n

ENV = "TEST_N8N_API_KEY"


def source(page_size: int) -> SourceConfig:
    return SourceConfig(
        name="prod-n8n",
        kind="n8n",
        base_url=FakeN8n.base_url,
        api_key_env=ENV,
        page_size=page_size,
    )


def main() -> None:
    db, count, page_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    fake = FakeN8n()
    fake.add(count)
    store = open_store(db)
    report = sync_source(Ledger(store), source(page_size), fake.client(), sleep=lambda s: None)
    print(report)


if __name__ == "__main__":
    main()
