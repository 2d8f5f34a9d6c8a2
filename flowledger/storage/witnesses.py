"""What the ledger keeps of its witnesses: each checkpoint it signed for them, the
cosignatures they answered, the size each last cosigned, and a refusal (with its alert queued
in the same transaction, so the alarm and its alert come together or not at all)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.domain.checkpoints import Checkpoint
from flowledger.storage.anchors import queue_new
from flowledger.storage.engine import Store
from flowledger.storage.models import table
from flowledger.storage.witness_tables import Cosignature, SignedCheckpoint, WitnessState

CHECKPOINTS = table(SignedCheckpoint)
COSIGNATURES = table(Cosignature)
STATES = table(WitnessState)


def record_checkpoint(store: Store, cp: Checkpoint, note: str, now: datetime) -> int:
    """The id of the checkpoint row of ``cp`` (made with ``note`` when new)."""
    with store.engine.begin() as conn:
        found = _checkpoint_id(conn, cp)
        if found is None:
            conn.execute(
                CHECKPOINTS.insert().values(size=cp.size, root=cp.root, note=note, signed_at=now)
            )
            found = _checkpoint_id(conn, cp)
    assert found is not None
    return found


def _checkpoint_id(conn: sa.Connection, cp: Checkpoint) -> int | None:
    return conn.execute(
        sa.select(CHECKPOINTS.c.id).where(
            CHECKPOINTS.c.size == cp.size, CHECKPOINTS.c.root == cp.root
        )
    ).scalar_one_or_none()


def _state(conn: sa.Connection, witness: str, url: str, now: datetime, **values: Any) -> None:
    updated = conn.execute(
        STATES.update().where(STATES.c.witness == witness).values(url=url, updated_at=now, **values)
    )
    if updated.rowcount == 0:
        conn.execute(
            STATES.insert().values(
                {"seen_size": 0, **values, "witness": witness, "url": url, "updated_at": now}
            )
        )


def seen_size(store: Store, witness: str) -> int:
    """The size ``witness`` last cosigned for this ledger (0: none known)."""
    with store.reader.connect() as conn:
        size = conn.execute(
            sa.select(STATES.c.seen_size).where(STATES.c.witness == witness)
        ).scalar_one_or_none()
    return int(size or 0)


def last_error(store: Store, witness: str) -> str | None:
    """Why the last request to ``witness`` got no cosignature (``None``: it did)."""
    with store.reader.connect() as conn:
        return conn.execute(
            sa.select(STATES.c.last_error).where(STATES.c.witness == witness)
        ).scalar_one_or_none()


def cosigned(
    store: Store,
    checkpoint_id: int,
    witness: str,
    url: str,
    size: int,
    cosignature: tuple[str, int],
    now: datetime,
) -> None:
    """Keep ``witness``'s cosignature (line, timestamp) of the checkpoint and its new size."""
    line, timestamp = cosignature
    with store.engine.begin() as conn:
        kept = conn.execute(
            sa.select(COSIGNATURES.c.witness).where(
                COSIGNATURES.c.checkpoint_id == checkpoint_id, COSIGNATURES.c.witness == witness
            )
        ).first()
        if kept is None:
            conn.execute(
                COSIGNATURES.insert().values(
                    checkpoint_id=checkpoint_id,
                    witness=witness,
                    line=line,
                    timestamp=timestamp,
                    received_at=now,
                )
            )
        _state(conn, witness, url, now, seen_size=size, last_error=None)


def failed(store: Store, witness: str, url: str, error: str, now: datetime) -> None:
    """The witness could not be asked, or answered something else than a cosignature or a
    refusal for inconsistency (kept as its last error; not an alarm)."""
    with store.engine.begin() as conn:
        _state(conn, witness, url, now, last_error=error[:2000])


def refused(
    store: Store,
    witness: str,
    url: str,
    size: int,
    reason: str,
    now: datetime,
    alerts: Sequence[dict[str, Any]],
) -> bool:
    """Record that ``witness`` refused the checkpoint of ``size`` for inconsistency, and queue
    ``alerts`` (outbox rows) with it; ``False`` when a refusal was already open (it stays,
    with its first evidence)."""
    with store.engine.begin() as conn:
        open_since = conn.execute(
            sa.select(STATES.c.refused_at).where(STATES.c.witness == witness)
        ).scalar_one_or_none()
        if open_since is not None:
            _state(conn, witness, url, now, last_error=reason[:2000])
            return False
        _state(
            conn,
            witness,
            url,
            now,
            refused_at=now,
            refused_size=size,
            refusal=reason[:2000],
            last_error=reason[:2000],
        )
        if alerts:
            queue_new(conn, alerts)
    return True


def clear_refusal(conn: sa.Connection, witness: str, now: datetime) -> bool:
    """A person has looked at the refusal of ``witness``: the alarm ends (``False``: none),
    in the transaction of ``conn`` that records it."""
    cleared = conn.execute(
        STATES.update()
        .where(STATES.c.witness == witness, STATES.c.refused_at.is_not(None))
        .values(refused_at=None, refused_size=None, refusal=None, updated_at=now)
    )
    return cleared.rowcount > 0
