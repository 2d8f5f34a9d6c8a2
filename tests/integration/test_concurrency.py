"""Two OS processes dispatch the same operation at once: exactly one `go` each round, each
dispatch in a transaction of its own or in a group commit among others (the receiver's)."""

from __future__ import annotations

from collections import Counter

import pytest

from flowledger.storage.engine import open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import chain
from tests.integration.racer import race, two_racers

ROUNDS = 100


@pytest.mark.parametrize("batched", [False, True], ids=["alone", "group-commit"])
def test_two_processes_racing_get_exactly_one_go_per_round(db_url: str, batched: bool) -> None:
    init_ledger(db_url)[0].dispose()
    outcomes = two_racers(race, db_url, ROUNDS, batched)

    for i in range(ROUNDS):
        decisions = Counter(outcomes[name][i][1] for name in ("left", "right"))
        assert decisions == {"go": 1, "hold": 1}, f"round {i}: {decisions}"
        loser = next(outcomes[n][i] for n in ("left", "right") if outcomes[n][i][1] == "hold")
        assert loser[2] == "in_flight"

    store = open_store(db_url)
    try:
        with store.engine.connect() as conn:
            attempts = conn.exec_driver_sql("SELECT count(*) FROM attempts").scalar_one()
            dispatching = conn.exec_driver_sql(
                "SELECT count(*) FROM operations WHERE state = 'dispatching'"
            ).scalar_one()
        own = 2 * 2 * ROUNDS if batched else 0  # each process's two of its own a round
        assert (attempts, dispatching) == (ROUNDS + own, ROUNDS + own)
        with store.reader.connect() as conn:
            assert chain.verify(conn).ok
    finally:
        store.dispose()
