"""Reads of what the witnesses said: the cosigned checkpoint of a size (the signed note with
every cosignature the ledger kept for it), the state of each witness, and the refusals that
are alarms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowledger.domain.checkpoints import unverified_checkpoint
from flowledger.storage import merkle as tree
from flowledger.storage.engine import Store
from flowledger.storage.models import table
from flowledger.storage.reads import Connection
from flowledger.storage.reads.chain import head, snapshot
from flowledger.storage.witness_tables import Cosignature, SignedCheckpoint, WitnessState

CHECKPOINTS = table(SignedCheckpoint)
COSIGNATURES = table(Cosignature)
STATES = table(WitnessState)


@dataclass(frozen=True)
class Witnessed:
    """One witness as the ledger knows it."""

    witness: str  # its vkey
    url: str
    seen_size: int
    last_error: str | None
    refused_at: datetime | None
    refused_size: int | None
    refusal: str | None
    updated_at: datetime


def cosigned_in(conn: Connection, size: int) -> str | None:
    """:func:`cosigned_note`, inside an open read."""
    if not 0 <= size <= head(conn)[0]:
        return None
    try:
        root = tree.root(conn, size)
    except KeyError:
        return None
    row = conn.execute(
        sa.select(CHECKPOINTS.c.id, CHECKPOINTS.c.note).where(
            CHECKPOINTS.c.size == size, CHECKPOINTS.c.root == root
        )
    ).first()
    if row is None:
        return None
    lines = conn.execute(
        sa.select(COSIGNATURES.c.line)
        .where(COSIGNATURES.c.checkpoint_id == row.id)
        .order_by(COSIGNATURES.c.witness)
    ).scalars()
    return str(row.note) + "".join(lines)


def cosigned_note(store: Store, size: int) -> str | None:
    """The checkpoint the ledger signed at ``size`` with the root its tree has there, the
    log's signature line followed by every cosignature kept for it (a signed note any
    tlog-checkpoint reader opens); ``None`` when no checkpoint of that tree was signed."""
    with snapshot(store) as conn:
        return cosigned_in(conn, size)


def with_cosignatures(store: Store, note: str) -> str:
    """``note`` (a checkpoint the ledger signed now) with the cosignatures kept for the same
    signed checkpoint, when the witnesses have cosigned it."""
    with snapshot(store) as conn:
        size = unverified_checkpoint(note).size
        kept = cosigned_in(conn, size)
    return kept if kept is not None and kept.startswith(note) else note


def latest_cosigned(store: Store, least: int, witnesses: Sequence[str]) -> str | None:
    """The newest checkpoint of at least ``least`` events of the tree as it stands that every
    one of ``witnesses`` (vkeys) cosigned, with its cosignatures (:func:`cosigned_in`);
    ``None`` when there is none."""
    wanted = sorted(set(witnesses))
    if not wanted:
        return None
    found = (
        sa.select(CHECKPOINTS.c.size, CHECKPOINTS.c.note)
        .join(COSIGNATURES, COSIGNATURES.c.checkpoint_id == CHECKPOINTS.c.id)
        .where(CHECKPOINTS.c.size >= least, COSIGNATURES.c.witness.in_(wanted))
        .group_by(CHECKPOINTS.c.id, CHECKPOINTS.c.size, CHECKPOINTS.c.note)
        .having(sa.func.count() == len(wanted))
        .order_by(CHECKPOINTS.c.size.desc())
    )
    with snapshot(store) as conn:
        for size, note in conn.execute(found).all():
            kept = cosigned_in(conn, size)  # None when the tree has another root there
            if kept is not None and kept.startswith(note):
                return kept
    return None


def states(conn: Connection) -> dict[str, Witnessed]:
    rows = conn.execute(sa.select(STATES).order_by(STATES.c.witness)).all()
    return {r.witness: Witnessed(**r._mapping) for r in rows}


def refusals(store: Store) -> list[Witnessed]:
    """The witnesses whose refusal of a checkpoint nobody has cleared: each is evidence that
    the log was rewritten, forked, truncated or restored (a blocking alarm)."""
    with store.reader.connect() as conn:
        return [w for w in states(conn).values() if w.refused_at is not None]
