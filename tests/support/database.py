"""The database as plain values, for "nothing changed" assertions, and the changes a forger
makes behind the ledger's back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlmodel import SQLModel

from flowledger.domain import merkle
from flowledger.domain.chain import event_body
from flowledger.domain.hashing import canonical_json, chain_hash
from flowledger.storage.engine import Store, make_store, resolve_url
from flowledger.storage.migrate import alembic_config
from flowledger.storage.models import from_db_time


def first_schema_ledger(folder: Path) -> Path:
    """A SQLite ledger at the first schema (``first.db`` in ``folder``), as the first flowledger
    made it: a ledger for ``migrate`` to upgrade."""
    db = folder / "first.db"
    first_schema(str(db))
    return db


def first_schema(db: str) -> None:
    """The first schema, made in ``db`` (a path or a URL) as the first flowledger made it."""
    from alembic import command

    store = make_store(resolve_url(db), create=True)
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
    store.dispose()


def snapshot(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, for "the database did not change" assertions."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.reader.connect() as conn:
        for name, tbl in sorted(SQLModel.metadata.tables.items()):
            rows = conn.execute(sa.select(tbl)).all()
            out[name] = sorted((tuple(r) for r in rows), key=repr)
    return out


def lock_waits(store: Store) -> int:
    """How many clients of this PostgreSQL database wait for a lock: a test that makes one
    writer wait for another's row lock knows by this that it does (an autovacuum worker
    waiting is not counted)."""
    with store.reader.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend' AND wait_event_type = 'Lock'"
            ).scalar_one()
        )


def engine_for(db: str) -> sa.Engine:
    """A plain engine on a ledger named as the CLI names it (a path or a URL), for changing
    it behind the ledger's back."""
    if "://" not in db:
        return sa.create_engine(f"sqlite:///{db}")
    return sa.create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))


def _without_event_guards(conn: sa.Connection) -> None:
    for table, guard in (("events", "events"), ("merkle_nodes", "merkle_nodes")):
        on = "" if conn.dialect.name == "sqlite" else f" ON {table}"
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {guard}_no_update{on}")
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {guard}_no_delete{on}")


def rebuild_tree(conn: sa.Connection) -> None:
    """The forger's last step: the Merkle tree built anew over the events as they now are."""
    _without_event_guards(conn)
    conn.exec_driver_sql("DELETE FROM merkle_nodes")
    edge: list[bytes] = []
    made = []
    hashes = conn.execute(sa.text("SELECT hash FROM events ORDER BY seq")).scalars()
    for i, digest in enumerate(hashes):
        for level, idx, h in merkle.append(edge, i, merkle.event_leaf(digest)):
            if level:
                made.append({"level": level, "idx": idx, "hash": h})
    if made:
        conn.execute(sa.text("INSERT INTO merkle_nodes VALUES (:level, :idx, :hash)"), made)


def rewrite_chain(db: str, seq: int, data: dict[str, Any]) -> None:
    """A careful forger: replace event ``seq``'s data, recompute its hash and every later
    one, and move the head along, so that the chain links up again."""
    engine = engine_for(db)
    with engine.begin() as conn:
        _without_event_guards(conn)
        prev = conn.execute(
            sa.text("SELECT prev_hash FROM events WHERE seq = :s"), {"s": seq}
        ).scalar_one()
        rows = conn.execute(
            sa.text(
                "SELECT seq, at, actor, kind, operation_id, hold_id, data FROM events"
                " WHERE seq >= :s ORDER BY seq"
            ),
            {"s": seq},
        ).all()
        for row in rows:
            body = data if row.seq == seq else json.loads(row.data)
            at = from_db_time(row.at)
            assert at is not None
            digest = chain_hash(
                prev,
                event_body(row.seq, at, row.actor, row.kind, row.operation_id, row.hold_id, body),
            )
            conn.execute(
                sa.text("UPDATE events SET data = :d, prev_hash = :p, hash = :h WHERE seq = :s"),
                {"d": canonical_json(body).decode(), "p": prev, "h": digest, "s": row.seq},
            )
            prev = digest
        conn.execute(sa.text("UPDATE chain_head SET hash = :h WHERE id = 1"), {"h": prev})
        rebuild_tree(conn)
    engine.dispose()


def truncate_chain(db: str, keep: int, *, rebuild: bool = True) -> None:
    """Delete every event after ``keep`` and roll the head back to it; the tree rebuilt over
    what is left unless ``rebuild`` is false (a careless forger leaves its nodes behind)."""
    engine = engine_for(db)
    with engine.begin() as conn:
        _without_event_guards(conn)
        conn.execute(sa.text("DELETE FROM events WHERE seq > :k"), {"k": keep})
        conn.execute(
            sa.text(
                "UPDATE chain_head SET seq = :k, hash = (SELECT hash FROM events WHERE seq = :k)"
                " WHERE id = 1"
            ),
            {"k": keep},
        )
        if rebuild:
            rebuild_tree(conn)
    engine.dispose()
