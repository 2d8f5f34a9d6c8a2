"""The ledger's own WAL checkpoint (SQLite): it holds the writer lock, so that no commit can
race it (the WAL-reset bug), and never waits for a reader, such as a backup being taken."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.plumbing.metrics import REGISTRY
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import BUSY_TIMEOUT_MS, Store
from flowledger.storage.migrate import init_ledger
from tests.support.builders import req


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    yield store
    store.dispose()


def test_the_checkpoint_holds_the_writer_lock_while_it_copies(sqlite_store: Store) -> None:
    Ledger(sqlite_store).dispatch("invoice:1", req("e1")).run("token:n8n")
    path = sqlite_store.url.database
    refused: list[str] = []

    def try_to_write(statement: str) -> None:
        if "wal_checkpoint" not in statement:
            return
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            refused.append(str(exc))
        finally:
            other.close()

    @sa.event.listens_for(sqlite_store.engine, "checkout")
    def trace(dbapi_connection: sqlite3.Connection, *_: object) -> None:
        dbapi_connection.set_trace_callback(try_to_write)

    try:
        assert sqlite_store.checkpoint()
    finally:
        sa.event.remove(sqlite_store.engine, "checkout", trace)
    assert refused == ["database is locked"]


def test_the_checkpoint_does_not_wait_for_a_reader_on_an_older_snapshot(
    sqlite_store: Store,
) -> None:
    ledger = Ledger(sqlite_store)
    ledger.dispatch("invoice:1", req("e1")).run("token:n8n")
    reader = sqlite3.connect(sqlite_store.url.database, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM events").fetchone() == (1,)  # its snapshot
    ledger.dispatch("invoice:2", req("e2")).run("token:n8n")
    whole: list[bool] = []
    checkpoint = threading.Thread(target=lambda: whole.append(sqlite_store.checkpoint()))
    checkpoint.start()
    # FULL would wait out the busy timeout here, the writer lock held, every commit behind it.
    checkpoint.join(BUSY_TIMEOUT_MS / 1000 / 2)
    alive = checkpoint.is_alive()
    reader.execute("COMMIT")
    reader.close()
    checkpoint.join()
    assert not alive and whole == [False]  # the reader still needed the last commit's frames
    ledger.dispatch("invoice:3", req("e3")).run("token:n8n")
    assert sqlite_store.checkpoint()  # the next one finishes it


def test_a_checkpoint_left_short_is_logged_and_counted(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from flowledger.storage import unit_of_work

    monkeypatch.setattr(unit_of_work, "WAL_RESET_AFFECTED", True)  # as on an affected build
    monkeypatch.setattr(unit_of_work, "CHECKPOINT_EVERY", 3)

    def counted() -> float:
        return REGISTRY.get_sample_value("flowledger_wal_checkpoints_short_total") or 0.0

    before = counted()
    ledger = Ledger(sqlite_store)
    ledger.dispatch("invoice:0", req("e0")).run("token:n8n")
    reader = sqlite3.connect(sqlite_store.url.database, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM events").fetchone()  # its snapshot, as a backup's
    try:
        for n in range(1, 6):  # commits 2 to 6: the checkpoints at 3 and 6, both left short
            ledger.dispatch(f"invoice:{n}", req(f"e{n}")).run("token:n8n")
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert ledger.unit.checkpoints_short == 2
    assert counted() == before + 2
    short = [r for r in caplog.records if "checkpoint left short" in r.getMessage()]
    assert len(short) == 2 and short[-1].levelname == "WARNING"
    ledger.dispatch("invoice:6", req("e6")).run("token:n8n")
    ledger.dispatch("invoice:7", req("e7")).run("token:n8n")
    ledger.dispatch("invoice:8", req("e8")).run("token:n8n")  # commit 9: the reader is gone
    assert ledger.unit.checkpoints_short == 2
