"""Signatures as stored: a signed request is accepted once.

The receiver records each signature it accepts (:func:`remember`) until the signature's
timestamp is outside the signing window, after which the window refuses it anyway; the hourly
housekeeping removes the expired rows (:func:`remove_expired`). The primary key makes the
check and the record one statement, so two receivers on one PostgreSQL cannot both accept it.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ledger.storage.engine import Store
from ledger.storage.models import SeenSignature, table

SEEN = table(SeenSignature)


def remember(store: Store, signature: str, expires_at: datetime) -> bool:
    """Record ``signature``; False if it was recorded before (a replay)."""
    values = {"signature": signature, "expires_at": expires_at}
    with store.engine.begin() as conn:
        insert = (
            postgresql.insert(SEEN) if conn.dialect.name == "postgresql" else sqlite.insert(SEEN)
        )
        stored = conn.execute(
            insert.values(**values).on_conflict_do_nothing().returning(SEEN.c.signature)
        ).scalar()
    return stored is not None


def remove_expired(conn: sa.Connection, now: datetime, *, limit: int) -> int:
    """Delete up to ``limit`` signatures past their window, oldest first; how many went."""
    doomed = (
        conn.execute(
            sa.select(SEEN.c.signature)
            .where(SEEN.c.expires_at <= now)
            .order_by(SEEN.c.expires_at)
            .limit(limit)
        )
        .scalars()
        .all()
    )
    if doomed:
        conn.execute(SEEN.delete().where(SEEN.c.signature.in_(doomed)))
    return len(doomed)
