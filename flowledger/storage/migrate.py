"""Creating and upgrading a ledger's schema with Alembic; no other code changes a schema."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from flowledger.storage.engine import (
    LedgerError,
    Store,
    first_line,
    hide_password,
    make_store,
    read_schema_version,
    resolve_url,
)

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(
    connection: sa.Connection | None = None, *, ledger_id: str | None = None
) -> Config:
    """``ledger_id``: the id migration 0005 gives the ledger instead of a random one (a
    fixture whose hashes must be the same on every run)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    cfg.attributes["ledger_id"] = ledger_id
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(store: Store) -> str | None:
    with store.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(store: Store, *, ledger_id: str | None = None) -> None:
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn, ledger_id=ledger_id), "head")


def init_ledger(db: str | None, *, ledger_id: str | None = None) -> tuple[Store, bool]:
    """Create a ledger (schema, identity, genesis chain head). Returns the store and whether it
    was new; an existing, current ledger is left as it is. ``ledger_id``: see
    :func:`alembic_config` (a new ledger's id is random)."""
    url = resolve_url(db)
    store = make_store(url, create=True)
    try:
        version = read_schema_version(store.engine)
        if version is not None:
            return store, False
        with store.engine.connect() as conn:
            foreign = [t for t in sa.inspect(conn).get_table_names() if t != "alembic_version"]
        if foreign:
            raise LedgerError(
                f"the database already holds other tables ({', '.join(sorted(foreign)[:5])}); "
                "give flowledger a database of its own"
            )
        upgrade(store, ledger_id=ledger_id)
    except sa.exc.DBAPIError as exc:
        store.dispose()
        raise LedgerError(
            f"cannot create the ledger at {hide_password(url)}: {first_line(exc)}"
        ) from exc
    except BaseException:
        store.dispose()
        raise
    return store, True
