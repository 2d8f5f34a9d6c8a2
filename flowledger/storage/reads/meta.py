"""Reads of ``ledger_meta``: facts about the ledger itself."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.models import LedgerMeta, table
from flowledger.storage.reads import Connection

META = table(LedgerMeta)
# The key a backup is marked with (its value: when it was taken); the live ledger never
# holds it, a ledger restored from a backup does until a person acknowledges the restore.
RESTORED = "restored_from_backup"


def is_demo(conn: Connection) -> bool:
    """Whether ``flowledger demo`` built this ledger (its data is made up)."""
    value = conn.execute(sa.select(META.c.value).where(META.c.key == "demo")).scalar_one_or_none()
    return value is not None


def identity(conn: Connection) -> tuple[str, str]:
    """The ledger's id and the hash its chain starts from (``ledger_id``, ``genesis``)."""
    rows = conn.execute(
        sa.select(META.c.key, META.c.value).where(META.c.key.in_(("ledger_id", "genesis")))
    ).all()
    found = {str(key): str(value) for key, value in rows}
    return found["ledger_id"], found["genesis"]


def restored_from(conn: Connection) -> datetime | None:
    """When the backup this ledger was restored from was taken (``flowledger backup`` marks
    each copy it makes), or None: never restored, or the restore acknowledged since."""
    value = conn.execute(sa.select(META.c.value).where(META.c.key == RESTORED)).scalar_one_or_none()
    return None if value is None else datetime.fromisoformat(str(value))
