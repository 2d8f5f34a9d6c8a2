"""The ``leases`` rows: who holds a named lease, and until when.

Taking one is one conditional UPDATE (or the INSERT of the first row), so two processes can
never both win it. Only a process of the ledger's own schema version may take or renew it,
so that two versions of flowledger sharing a database across a migration never both hold it.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Lease, LedgerMeta, from_db_time, table

LEASES = table(Lease)
META = table(LedgerMeta)


class SchemaChanged(Exception):
    """The ledger's schema version is not the one the process asking for the lease knows."""

    def __init__(self, found: int | None) -> None:
        super().__init__(f"the ledger's schema version is {found}")
        self.found = found


def take(
    store: Store, name: str, holder: str, now: datetime, until: datetime, *, schema_version: int
) -> bool:
    """Give lease ``name`` to ``holder`` until ``until`` if it is free, expired at ``now``, or
    ``holder``'s already; whether ``holder`` has it. In a transaction of its own: the INSERT of
    a first row that another process inserted first fails at once, and that is a lost race.

    The ledger's schema version is read in the same transaction, after the row is written, and
    when it is not ``schema_version`` nothing is written and :class:`SchemaChanged` is raised: a
    process of an older flowledger cannot renew its lease once a newer one has migrated the
    ledger (nor a newer one after a restore), and the new version takes the lease only when
    the last renewal before the migration has run out."""
    try:
        with store.engine.begin() as conn:
            taken = conn.execute(
                LEASES.update()
                .where(
                    LEASES.c.name == name,
                    sa.or_(LEASES.c.holder == holder, LEASES.c.expires_at <= now),
                )
                .values(holder=holder, expires_at=until)
            ).rowcount
            if taken == 0:
                exists = conn.execute(
                    sa.select(LEASES.c.holder).where(LEASES.c.name == name)
                ).first()
                if exists is None:
                    conn.execute(LEASES.insert().values(name=name, holder=holder, expires_at=until))
                    taken = 1
            found = conn.execute(
                sa.select(META.c.value).where(META.c.key == "schema_version")
            ).scalar_one_or_none()
            if found is None or int(found) != schema_version:
                raise SchemaChanged(None if found is None else int(found))  # rolls back
    except sa.exc.IntegrityError:
        taken = 0  # another process inserted the row first
    return bool(taken)


def held_by(store: Store, name: str) -> tuple[str, datetime] | None:
    """Who lease ``name``'s row names, and until when (None: no one has taken it yet). The
    time may be past: the row is left as it was until someone takes the lease over."""
    with store.reader.connect() as conn:
        row = conn.execute(
            sa.select(LEASES.c.holder, LEASES.c.expires_at).where(LEASES.c.name == name)
        ).first()
    if row is None:
        return None
    until = from_db_time(row.expires_at)
    assert until is not None  # the column is NOT NULL
    return str(row.holder), until


def expire(conn: sa.Connection, name: str, holder: str, at: datetime) -> None:
    """End ``holder``'s lease ``name`` at ``at`` (if it still holds it)."""
    conn.execute(
        LEASES.update()
        .where(LEASES.c.name == name, LEASES.c.holder == holder)
        .values(expires_at=at)
    )
