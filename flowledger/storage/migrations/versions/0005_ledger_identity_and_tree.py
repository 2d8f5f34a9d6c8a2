"""A ledger identity and a Merkle tree over the events.

The identity is a random id kept in ``ledger_meta`` (``ledger_id``) with the hash its chain
starts from (``genesis``). A ledger without events yet starts from its identity's genesis
(:func:`flowledger.domain.hashing.genesis_hash`); one that has events keeps the all-zeros
genesis its chain was sealed from: its chain is not rewritten, and verifies as before.

The tree (``merkle_nodes``, every perfect subtree of two leaves or more; a leaf is the hash of
its event's hash, :mod:`flowledger.domain.merkle`) is built
here over the events there are, and from then on extended in the transaction of each append:
by the writer on SQLite (:mod:`flowledger.storage.merkle`), by a statement trigger on
PostgreSQL (the append's sequence numbers are only known in the database).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 18:45:00
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import context, op

from flowledger.domain import merkle
from flowledger.domain.hashing import GENESIS_HASH, genesis_hash

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_BATCH = 10_000

# PostgreSQL: the events a statement appended, in order, each as a leaf, and each perfect
# subtree it completes, with its left sibling read back (a leaf from its event); the chain
# head is locked by the appending statement, so appends run one after another.
_PG_APPEND = r"""
CREATE FUNCTION flowledger_merkle_append() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev record;
    h bytea;
    sibling bytea;
    lvl smallint;
    pos bigint;
BEGIN
    FOR ev IN SELECT seq, hash FROM appended ORDER BY seq LOOP
        pos := ev.seq - 1;
        lvl := 0;
        h := sha256('\x00'::bytea || decode(ev.hash, 'hex'));
        WHILE pos % 2 = 1 LOOP
            IF lvl = 0 THEN
                SELECT sha256('\x00'::bytea || decode(e.hash, 'hex')) INTO STRICT sibling
                FROM events AS e WHERE e.seq = pos;
            ELSE
                SELECT m.hash INTO STRICT sibling FROM merkle_nodes AS m
                WHERE m.level = lvl AND m.idx = pos - 1;
            END IF;
            h := sha256('\x01'::bytea || sibling || h);
            lvl := lvl + 1;
            pos := pos / 2;
            INSERT INTO merkle_nodes (level, idx, hash) VALUES (lvl, pos, h);
        END LOOP;
    END LOOP;
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "merkle_nodes",
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("idx", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.LargeBinary(length=32), nullable=False),
        sa.PrimaryKeyConstraint("level", "idx"),
        sqlite_with_rowid=False,
    )
    ledger_id = context.config.attributes.get("ledger_id") or str(uuid.uuid4())
    seq = bind.execute(sa.text("SELECT seq FROM chain_head WHERE id = 1")).scalar_one()
    genesis = GENESIS_HASH
    if seq == 0:
        genesis = genesis_hash(ledger_id)
        bind.execute(sa.text("UPDATE chain_head SET hash = :g WHERE id = 1"), {"g": genesis})
    meta = sa.table("ledger_meta", sa.column("key", sa.String), sa.column("value", sa.String))
    op.bulk_insert(
        meta, [{"key": "ledger_id", "value": ledger_id}, {"key": "genesis", "value": genesis}]
    )
    _build_tree(bind)
    _protect_nodes(bind.dialect.name)
    op.execute("UPDATE ledger_meta SET value = '5' WHERE key = 'schema_version'")


def _build_tree(bind: sa.Connection) -> None:
    """The tree over the events there are, a batch at a time."""
    nodes = sa.table(
        "merkle_nodes",
        sa.column("level", sa.SmallInteger),
        sa.column("idx", sa.BigInteger),
        sa.column("hash", sa.LargeBinary),
    )
    edge: list[bytes] = []
    size = 0
    while True:
        rows = bind.execute(
            sa.text("SELECT seq, hash FROM events WHERE seq > :after ORDER BY seq LIMIT :n"),
            {"after": size, "n": _BATCH},
        ).all()
        if not rows:
            return
        made = []
        for seq, digest in rows:
            if seq != size + 1:
                raise RuntimeError(
                    f"event {size + 1} is missing (next is {seq}): run `flowledger verify` "
                    "and repair the chain before migrating"
                )
            for level, idx, h in merkle.append(edge, size, merkle.event_leaf(digest)):
                if level:
                    made.append({"level": level, "idx": idx, "hash": h})
            size = seq
        if made:
            bind.execute(nodes.insert(), made)


def _protect_nodes(dialect: str) -> None:
    """The tree's nodes are append-only, as the events are; on PostgreSQL the trigger that
    extends the tree with each append."""
    if dialect == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER merkle_nodes_no_{action.lower()} BEFORE {action} ON "
                "merkle_nodes BEGIN SELECT RAISE(ABORT, 'the Merkle tree is append-only'); END"
            )
        return
    op.execute(
        "CREATE FUNCTION flowledger_tree_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the Merkle tree is append-only'; END $$"
    )
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER merkle_nodes_no_{action.lower()} BEFORE {action} ON merkle_nodes "
            "FOR EACH ROW EXECUTE FUNCTION flowledger_tree_append_only()"
        )
    op.execute(_PG_APPEND)
    op.execute(
        "CREATE TRIGGER events_merkle_append AFTER INSERT ON events "
        "REFERENCING NEW TABLE AS appended FOR EACH STATEMENT "
        "EXECUTE FUNCTION flowledger_merkle_append()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_merkle_append ON events")
        op.execute("DROP FUNCTION IF EXISTS flowledger_merkle_append()")
    op.drop_table("merkle_nodes")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS flowledger_tree_append_only()")
    op.execute("DELETE FROM ledger_meta WHERE key IN ('ledger_id', 'genesis')")
    op.execute("UPDATE ledger_meta SET value = '4' WHERE key = 'schema_version'")
