"""Run one sweep over a ledger at a given time; the crash test kills it at a named point.

``python -m tests.crash.sweep_child DB_URL NOW BATCH``
"""

from __future__ import annotations

import sys
from datetime import datetime

from ledger.config import SweepConfig
from ledger.scheduled.sweep import Sweep
from ledger.storage.engine import open_store
from ledger.writer.services import Ledger


def main() -> None:
    db, now, batch = sys.argv[1], datetime.fromisoformat(sys.argv[2]), int(sys.argv[3])
    store = open_store(db)
    print(Sweep(Ledger(store, clock=lambda: now), SweepConfig(), batch=batch).run())


if __name__ == "__main__":
    main()
