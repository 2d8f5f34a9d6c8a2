"""The ``leases`` rows: who holds a named lease, and until when.

Taking one is one conditional UPDATE (or the INSERT of the first row), so two processes can
never both win it.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.engine import Store
from flowledger.storage.models import Lease, table

LEASES = table(Lease)


def take(store: Store, name: str, holder: str, now: datetime, until: datetime) -> bool:
    """Give lease ``name`` to ``holder`` until ``until`` if it is free, expired at ``now``, or
    ``holder``'s already; whether ``holder`` has it. In a transaction of its own: the INSERT of
    a first row that another process inserted first fails at once, and that is a lost race."""
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
    except sa.exc.IntegrityError:
        taken = 0  # another process inserted the row first
    return bool(taken)


def expire(conn: sa.Connection, name: str, holder: str, at: datetime) -> None:
    """End ``holder``'s lease ``name`` at ``at`` (if it still holds it)."""
    conn.execute(
        LEASES.update()
        .where(LEASES.c.name == name, LEASES.c.holder == holder)
        .values(expires_at=at)
    )
