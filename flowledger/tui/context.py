"""What every screen of the UI is given: the services, who is acting, and the clock."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store


@dataclass(frozen=True)
class Context:
    ledger: Ledger
    operator: str
    read_only: bool
    clock: Callable[[], datetime]
    report_dir: Path
    page_size: int = 100
    refresh_seconds: float | None = 5.0
    demo: bool = False
    # When the backup this ledger was restored from was taken, until that is acknowledged.
    restored_from: datetime | None = None
    # A witness's refusal of a checkpoint per line (services.witnessing.alarm), until cleared.
    witness_alarms: tuple[str, ...] = ()
    # Why flowledger.toml could not be read, when it could not: the UI runs on the defaults
    # and says so on the Sources tab.
    config_error: str | None = None

    @property
    def store(self) -> Store:
        return self.ledger.store

    def now(self) -> datetime:
        return self.clock()
