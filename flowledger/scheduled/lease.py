"""Who runs the scheduled jobs when several processes share one database.

A row in ``leases`` names the holder and an expiry; the holder renews it well before it runs
out, and whoever finds it expired takes it over with one conditional UPDATE (or INSERT for the
first one), so two processes can never both win it. On SQLite the same row works (writers are
serialised anyway). The jobs are idempotent (cause keys, stable delivery ids), so a holder that
stalls past its expiry while another takes over costs duplicate work, never a duplicate hold.
The expiry is written from the holder's clock: hosts sharing a database keep their clocks in
sync (NTP) well within the lease time.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime, timedelta

from flowledger.plumbing.clock import Clock, utcnow
from flowledger.storage import lease as leases
from flowledger.storage.engine import Store

log = logging.getLogger(__name__)


def holder_name() -> str:
    """host:pid:random, so a restarted process with a recycled pid is someone else."""
    return f"{socket.gethostname()[:100]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    def __init__(
        self,
        store: Store,
        ttl: timedelta,
        *,
        name: str = "scheduler",
        holder: str | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.name = name
        self.holder = holder or holder_name()
        self.clock = clock
        self._until: datetime | None = None

    def held(self) -> bool:
        """Whether this process holds the lease now (by its own last renewal)."""
        return self._until is not None and self.clock() < self._until

    def renew(self) -> bool:
        """Take the lease if it is free or expired, extend it if ours; report whether held."""
        now = self.clock()
        until = now + self.ttl
        taken = leases.take(self.store, self.name, self.holder, now, until)
        was = self.held()
        self._until = until if taken else None
        if taken and not was:
            log.info("lease %s taken by %s until %s", self.name, self.holder, until.isoformat())
        elif was and not taken:
            log.warning("lease %s lost by %s", self.name, self.holder)
        return taken

    def release(self) -> None:
        """Let another process take over at once (on a clean shutdown)."""
        if self._until is None:
            return
        with self.store.engine.begin() as conn:
            leases.expire(conn, self.name, self.holder, self.clock())
        self._until = None
