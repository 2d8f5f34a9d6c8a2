"""Who runs the scheduled jobs when several processes share one database.

A row in ``leases`` names the holder and an expiry; the holder renews it well before it runs
out, and whoever finds it expired takes it over with one conditional UPDATE (or INSERT for the
first one), so two processes can never both win it. On SQLite the same row works (writers are
serialised anyway). The jobs are idempotent (cause keys, stable delivery ids), so a holder that
stalls past its expiry while another takes over costs duplicate work, never a duplicate hold.
The expiry is written from the holder's clock: hosts sharing a database keep their clocks in
sync (NTP) well within the lease time.

A process holds the lease only while the ledger's schema is the one it knows: when a newer
flowledger migrates the database under a running older one, the older one's next renewal is
refused, it steps down with one line in its log, and its jobs stop; the newer one takes over
once the older one's last renewal runs out, so the two never hold it at once.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import datetime, timedelta

from flowledger.plumbing.clock import Clock, utcnow
from flowledger.storage import lease as leases
from flowledger.storage.engine import Store, schema_problem
from flowledger.storage.models import SCHEMA_VERSION

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
        schema_version: int = SCHEMA_VERSION,
    ) -> None:
        self.store = store
        self.schema_version = schema_version  # of this program: the lease is only for its own
        self.refused: str | None = None  # why the ledger's schema keeps this process from it
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
        was = self.held()
        try:
            taken = leases.take(
                self.store, self.name, self.holder, now, until, schema_version=self.schema_version
            )
        except leases.SchemaChanged as exc:
            self._until = None
            self._refuse(exc.found, was)
            return False
        self.refused = None
        self._until = until if taken else None
        if taken and not was:
            log.info("lease %s taken by %s until %s", self.name, self.holder, until.isoformat())
        elif was and not taken:
            log.warning("lease %s lost by %s", self.name, self.holder)
        return taken

    def _refuse(self, found: int | None, was: bool) -> None:
        """Say once, in one line, why this process may not hold the lease."""
        why = schema_problem(self.store.url, found, self.schema_version)
        if why is None or why == self.refused:
            return
        self.refused = why
        log.error(
            "lease %s %s by %s: %s; no scheduled job runs in this process",
            self.name,
            "given up" if was else "refused",
            self.holder,
            why,
        )

    def holder_now(self) -> tuple[str, datetime] | None:
        """Who holds the lease by its row, and until when: what a process standing by says."""
        return leases.held_by(self.store, self.name)

    def release(self) -> None:
        """Let another process take over at once (on a clean shutdown)."""
        if self._until is None:
            return
        with self.store.engine.begin() as conn:
            leases.expire(conn, self.name, self.holder, self.clock())
        self._until = None
