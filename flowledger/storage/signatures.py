"""Signatures as stored: a signed request is accepted once.

The receiver records each signature it accepts until the signature's timestamp is outside the
signing window, after which the window refuses it anyway; the hourly housekeeping removes the
expired rows (:func:`remove_expired`). The primary key makes the check and the record one
statement, so two receivers on one PostgreSQL cannot both accept it: the second waits for the
first's transaction and then finds the row.

The receiver records a signature in the transaction of the write it authorises (:func:`record`,
run by the group commit ahead of that unit, see
:meth:`~flowledger.storage.unit_of_work.UnitOfWork.run_many`;
the outcome is read with the unit's own statements): one commit for both, not a transaction of
its own per request (bench/README.md, "Write path").
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.models import SeenSignature, table
from flowledger.storage.tx import Tx

SEEN = table(SeenSignature)
_RECORD = (
    "INSERT INTO seen_signatures (signature, expires_at) VALUES (:signature, :expires_at)"
    " ON CONFLICT DO NOTHING"
)


def record(tx: Tx, signature: str, expires_at: datetime) -> Callable[[], bool]:
    """Record ``signature`` in ``tx``. The function returned tells, once the statement has
    been waited for (:meth:`Tx.counted_later`: on PostgreSQL the unit's next read or its
    settle, so it costs no round trip), whether it was new: False for a replay."""
    count = tx.counted_later(_RECORD, {"signature": signature, "expires_at": tx.time(expires_at)})
    return lambda: count() == 1


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
