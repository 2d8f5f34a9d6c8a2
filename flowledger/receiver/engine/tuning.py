"""The interpreter's settings for a process that serves or writes under load, set once before
it starts (the receiver in :func:`flowledger.receiver.server.serve_app`, the writer process
before its first batch). Measurements behind them: bench/README.md, "Receiver engine"."""

from __future__ import annotations

import gc
import sys

# The writer thread releases the GIL on every SQLite call; at the default interval each
# re-acquisition can wait that long behind the busy event loop. A short one hands it back.
SWITCH_INTERVAL = 0.0005  # seconds

# The youngest generation waits for 50,000 new containers, not 700: a request makes a few
# hundred that reference counting frees, so the default ran it every few requests for nothing.
GC_THRESHOLD = (50_000, 20, 100)


def quiet_collector() -> None:
    """Everything built so far frozen out of the collector's sight (a full collection walking
    it found nothing to free and stalled every request in flight), and the youngest generation
    at :data:`GC_THRESHOLD`."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def short_switches() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL)
