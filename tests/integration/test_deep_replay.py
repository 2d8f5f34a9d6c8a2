"""The replay behind ``verify --deep`` agrees with tables written the way the receiver writes
them: many workflow calls racing from threads, batched into shared transactions, with
rejections, unknown outcomes, conflicting receipts and a person's decisions in between."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa

from flowledger.domain import FailOutcome
from flowledger.services.ledger import Ledger
from flowledger.storage.models import Hold, table
from flowledger.storage.reads import chain
from flowledger.storage.reads.chain import snapshot
from flowledger.storage.reads.replay import deep_verify
from tests.support.builders import req

HOLDS = table(Hold)
OPS = [f"op:{n}" for n in range(12)]


def _storm(ledger: Ledger, seed: int) -> None:
    """One client: batches of random calls on a few shared operations."""
    rnd = random.Random(seed)
    for round_ in range(15):
        units = []
        for n in range(rnd.randint(1, 4)):
            op = rnd.choice(OPS)
            execution = f"e{seed}-{round_}-{n}"
            call = rnd.choice(
                [
                    ledger.dispatch(op, req(execution)),
                    ledger.confirm(op, rnd.choice(["R-1", "R-2"]), execution_id=execution),
                    ledger.fail(op, FailOutcome.REJECTED, "400", execution_id=execution),
                    ledger.fail(op, FailOutcome.UNKNOWN, "timeout"),
                ]
            )
            units.append((f"token:{seed}", call.work))
        ledger.run_many(units)


def _decide(ledger: Ledger) -> None:
    """A person settles the open blocking holds, a different decision each."""
    with ledger.store.reader.connect() as conn:
        holds = conn.execute(
            sa.select(HOLDS.c.id, HOLDS.c.reason)
            .where(HOLDS.c.resolved_at.is_(None), HOLDS.c.blocking)
            .order_by(HOLDS.c.id)
        ).all()
    for n, hold in enumerate(holds):
        action = ("confirm", "release", "cancel")[n % 3]
        if hold.reason == "receipt_conflict" and action == "release":
            action = "confirm"
        try:
            ledger.resolve(hold.id, action, note="checked", operator="ann", receipt="R-seen").run()
        except Exception:  # already closed by an earlier decision on the same operation
            continue


def test_racing_batched_calls_and_decisions_replay_to_the_same_tables(ledger: Ledger) -> None:
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda seed: _storm(ledger, seed), range(4)))
    _decide(ledger)
    with ThreadPoolExecutor(5) as pool:  # now a person decides while the calls race
        storms = [pool.submit(_storm, ledger, seed) for seed in range(4, 8)]
        for _ in range(3):
            _decide(ledger)
        for storm in storms:
            storm.result()
    with ledger.store.reader.connect() as conn:
        found = deep_verify(conn, batch=3)
        receipts = conn.execute(sa.text("SELECT count(*) FROM receipts")).scalar()
    assert found.ok, found.findings[:10]
    assert found.operations == len(OPS) and found.holds > 5 and receipts


def test_a_write_committed_during_the_check_is_not_a_difference(ledger: Ledger) -> None:
    """The replay and the tables are read from one snapshot: a call committed after the
    check began is in neither."""
    ledger.dispatch("op:0", req("e0")).run("token:a")
    with snapshot(ledger.store) as conn:
        assert chain.verify(conn).head_seq == 1  # the snapshot starts here
        ledger.confirm("op:0", "R-0").run("token:a")
        ledger.dispatch("op:1", req("e1")).run("token:a")
        found = deep_verify(conn)
        assert chain.verify(conn).ok
    assert found.ok, found.findings
    assert (found.operations, found.events) == (1, 1)
