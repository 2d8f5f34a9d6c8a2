"""The Merkle tree as the ledger keeps it, on SQLite and PostgreSQL: what the appends leave is
RFC 9162's tree over the events at every size; each ledger has an identity and a genesis of its
own; a ledger from before both migrates without its chain being rewritten."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command

from flowledger.domain import merkle
from flowledger.domain.chain import event_body
from flowledger.domain.hashing import GENESIS_HASH, canonical_json, chain_hash, genesis_hash
from flowledger.services.ledger import Ledger
from flowledger.storage import merkle as tree
from flowledger.storage.engine import Store, make_store, resolve_url
from flowledger.storage.migrate import alembic_config, init_ledger, upgrade
from flowledger.storage.reads import chain
from flowledger.storage.reads.meta import identity
from tests.support.builders import T0, FakeClock, req


def event_hashes(store: Store) -> list[str]:
    with store.reader.connect() as conn:
        return list(conn.execute(sa.text("SELECT hash FROM events ORDER BY seq")).scalars())


def assert_tree_is_rfc_9162s(store: Store) -> None:
    leaves = [merkle.event_leaf(h) for h in event_hashes(store)]
    with store.reader.connect() as conn:
        for size in range(1, len(leaves) + 1):
            assert tree.root(conn, size) == merkle.root_of(leaves[:size]), size
        count = conn.execute(sa.text("SELECT count(*) FROM merkle_nodes")).scalar_one()
    # Every perfect subtree above the leaves, nothing else: n - popcount(n) of them.
    assert count == len(leaves) - bin(len(leaves)).count("1")


def test_appends_one_and_many_at_a_time_leave_rfc_9162s_tree(ledger: Ledger, store: Store) -> None:
    for i in range(12):
        ledger.dispatch(f"op-{i}", req(f"exec-{i}")).run("token:n8n")
        if i % 3 == 0:
            ledger.confirm(f"op-{i}", f"R-{i}", execution_id=f"exec-{i}").run("token:n8n")
    ledger.run_many(
        [("token:a", ledger.dispatch(f"batch-{i}", req(f"exec-b{i}")).work) for i in range(9)]
    )
    assert len(event_hashes(store)) > 20
    assert_tree_is_rfc_9162s(store)
    with store.reader.connect() as conn:
        assert chain.verify(conn).ok


def test_two_ledgers_have_their_own_identity_and_genesis(tmp_path: Path) -> None:
    heads, firsts = [], []
    for name in ("a", "b"):
        store, _ = init_ledger(str(tmp_path / f"{name}.db"))
        Ledger(store, clock=FakeClock()).dispatch("op", req()).run("token:n8n")
        with store.reader.connect() as conn:
            ledger_id, genesis = identity(conn)
            assert genesis == genesis_hash(ledger_id)
            heads.append(genesis)
            firsts.append(conn.execute(sa.text("SELECT hash FROM events")).scalar_one())
        store.dispose()
    assert heads[0] != heads[1] and firsts[0] != firsts[1]


def old_ledger(db: str, events: int) -> Store:
    """A ledger of the schema before identities (0004), with ``events`` events sealed from
    the all-zeros genesis as that schema's writer sealed them."""
    store = make_store(resolve_url(db), create=True)
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0004")
        prev = GENESIS_HASH
        for seq in range(1, events + 1):
            data = {"n": seq}
            body = event_body(seq, T0, "token:n8n", "note", f"op-{seq}", None, data)
            digest = chain_hash(prev, body)
            conn.execute(
                sa.text(
                    "INSERT INTO events (seq, at, actor, kind, operation_id, data, prev_hash, hash)"
                    " VALUES (:seq, :at, 'token:n8n', 'note', :op, :data, :prev, :hash)"
                ),
                {
                    "seq": seq,
                    "at": T0 if conn.dialect.name != "sqlite" else "2026-11-02 09:00:00.000000",
                    "op": f"op-{seq}",
                    "data": canonical_json(data).decode(),
                    "prev": prev,
                    "hash": digest,
                },
            )
            prev = digest
        conn.execute(
            sa.text("UPDATE chain_head SET seq = :s, hash = :h WHERE id = 1"),
            {"s": events, "h": prev},
        )
    return store


def test_an_old_chain_migrates_unchanged_verifies_and_grows(db_url: str) -> None:
    store = old_ledger(db_url, 37)
    before = event_hashes(store)
    upgrade(store)
    try:
        assert event_hashes(store) == before  # not one event rewritten
        with store.reader.connect() as conn:
            ledger_id, genesis = identity(conn)
            assert len(ledger_id) == 36 and genesis == GENESIS_HASH
            assert chain.verify(conn).ok
        assert_tree_is_rfc_9162s(store)
        Ledger(store, clock=FakeClock()).dispatch("after", req()).run("token:n8n")
        assert_tree_is_rfc_9162s(store)
        with store.reader.connect() as conn:
            assert chain.verify(conn).ok
            zeros = chain.verify(conn, expect_head="0" * 64)
        assert not zeros.ok and "tells this ledger from no other" in (zeros.problem or "")
    finally:
        store.dispose()


def test_an_empty_old_ledger_gets_its_own_genesis(db_url: str) -> None:
    store = old_ledger(db_url, 0)
    upgrade(store)
    try:
        with store.reader.connect() as conn:
            ledger_id, genesis = identity(conn)
            assert genesis == genesis_hash(ledger_id) == chain.head(conn)[1]
    finally:
        store.dispose()
