"""Reads of ``ledger_meta``: facts about the ledger itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from flowledger.storage.models import LedgerMeta, table
from flowledger.storage.reads import Connection

META = table(LedgerMeta)
# The key a SQLite backup is marked with (its value: when it was taken); the live ledger
# never holds it, a ledger restored from a backup does until a person acknowledges the restore.
RESTORED = "restored_from_backup"
# PostgreSQL: the last backup taken of this database (JSON: ``taken_at``, and ``database``,
# what names this database as PostgreSQL made it), written before ``pg_dump`` reads it. A
# restore makes its tables anew (in another database or cluster, or with ``--clean`` in the
# same one), so a ledger whose ``database`` is not its own was restored from that backup.
BACKUP_OF = "backup_of"
# The last restore a person acknowledged (JSON: ``backup_taken_at``, ``by``, ``at``), written
# with its ``restore_acknowledged`` event so that ``doctor`` finds it without reading the
# events, which have no index by kind.
ACKNOWLEDGED = "restore_acknowledged"


@dataclass(frozen=True)
class Acknowledgement:
    """A restore a person acknowledged: when the backup was taken, who, and when."""

    backup_taken_at: datetime
    by: str
    at: datetime


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
    """When the backup this ledger was restored from was taken (:data:`RESTORED`,
    :data:`BACKUP_OF`), or None: never restored, or the restore acknowledged since."""
    rows = conn.execute(
        sa.select(META.c.key, META.c.value).where(META.c.key.in_((RESTORED, BACKUP_OF)))
    ).all()
    found = {str(key): str(value) for key, value in rows}
    if RESTORED in found:
        return datetime.fromisoformat(found[RESTORED])
    if BACKUP_OF in found and conn.dialect.name == "postgresql":
        stamp = json.loads(found[BACKUP_OF])
        if stamp["database"] != database_identity(conn):
            return datetime.fromisoformat(stamp["taken_at"])
    return None


def acknowledged(conn: Connection) -> Acknowledgement | None:
    """The last restore a person acknowledged (:data:`ACKNOWLEDGED`), or None: none since
    this version of the ledger began to keep it."""
    value = conn.execute(
        sa.select(META.c.value).where(META.c.key == ACKNOWLEDGED)
    ).scalar_one_or_none()
    if value is None:
        return None
    found = json.loads(value)
    return Acknowledgement(
        datetime.fromisoformat(found["backup_taken_at"]),
        str(found["by"]),
        datetime.fromisoformat(found["at"]),
    )


def database_identity(conn: Connection) -> str:
    """PostgreSQL: this database as the server made it, which no dump carries: the cluster's
    system identifier, the database's oid and the ``events`` table's oid."""
    return str(
        conn.exec_driver_sql(
            "SELECT (SELECT system_identifier FROM pg_control_system())::text || '/' || "
            "(SELECT oid FROM pg_database WHERE datname = current_database())::text || '/' || "
            "'events'::regclass::oid::text"
        ).scalar_one()
    )
