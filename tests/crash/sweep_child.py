"""Run one sweep over a ledger at a given time; the crash test kills it at a named point.

``python -m tests.crash.sweep_child DB_URL NOW BATCH``
"""

from __future__ import annotations

import sys
from datetime import datetime

from flowledger.config import SweepConfig
from flowledger.scheduled.sweep import Sweep
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store


def main() -> None:
    db, now, batch = sys.argv[1], datetime.fromisoformat(sys.argv[2]), int(sys.argv[3])
    store = open_store(db)
    print(Sweep(Ledger(store, clock=lambda: now), SweepConfig(), batch=batch).run())


if __name__ == "__main__":
    main()
