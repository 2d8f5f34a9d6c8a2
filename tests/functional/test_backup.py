"""``flowledger backup`` and ``migrate --backup-dir``: a copy taken while the ledger is
written, owner-only, checked before it is named, and marked as a backup."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import threading
from datetime import datetime
from pathlib import Path

import pytest

from flowledger.domain.display import counted
from flowledger.services.ledger import Ledger
from flowledger.storage import backups
from flowledger.storage.engine import make_store, open_store, resolve_url
from flowledger.storage.migrate import init_ledger
from flowledger.storage.problems import LedgerError
from flowledger.storage.reads import Connection, chain
from flowledger.storage.reads.meta import RESTORED
from tests.conftest import drop_pg_database, make_pg_database
from tests.support.builders import req
from tests.support.cli import cli
from tests.support.database import first_schema_ledger
from tests.support.ledgers import new_ledger


def meta(path: Path) -> dict[str, str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return dict(conn.execute("SELECT key, value FROM ledger_meta").fetchall())


@pytest.fixture
def written(tmp_path: Path) -> Path:
    """A SQLite ledger with two confirmed operations."""
    db = tmp_path / "ledger.db"
    store = new_ledger(db)
    ledger = Ledger(store)
    for n in (1, 2):
        ledger.dispatch(f"invoice:{n}", req(f"e{n}")).run("token:n8n")
        ledger.confirm(f"invoice:{n}", f"R-{n}").run("token:n8n")
    store.dispose()
    return db


def test_backup_writes_an_owner_only_copy_that_verifies_and_is_marked(
    written: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.db"
    code, out, err = cli("backup", str(copy), "--db", str(written), "--deep")
    assert code == 0, err
    assert "copy verified: 4 events" in out and "copy verified deep: 2 operations" in out
    assert f"written to {copy}" in out
    assert copy.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    taken = datetime.fromisoformat(meta(copy)[RESTORED])
    assert taken.strftime("%Y-%m-%d %H:%M:%S UTC") in out
    assert RESTORED not in meta(written)  # the live ledger is never marked
    code, out, _ = cli("verify", "--deep", "--db", str(copy))
    assert code == 0 and "chain ok: 4 events" in out


def test_backup_into_a_directory_names_the_copy_for_its_time(written: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    code, out, err = cli("backup", str(folder), "--db", str(written))
    assert code == 0, err
    (copy,) = folder.iterdir()
    assert copy.name.startswith("flowledger-") and copy.name.endswith("Z.db")
    assert f"written to {copy}" in out


def test_backup_never_replaces_a_file(written: Path, tmp_path: Path) -> None:
    there = tmp_path / "there.db"
    there.write_bytes(b"keep me")
    code, out, err = cli("backup", str(there), "--db", str(written))
    assert code == 2 and out == "" and "exists already" in err
    assert there.read_bytes() == b"keep me"


def test_a_copy_that_fails_its_check_is_removed_and_never_named(
    written: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "copy.db"

    def refuse(conn: Connection) -> None:
        assert chain.verify(conn).checked == 4  # the check reads the copy itself
        raise LedgerError("the copy fails verify")

    store = open_store(str(written))
    try:
        with pytest.raises(LedgerError, match="fails verify"):
            backups.back_up(store, dest, datetime.now().astimezone(), refuse)
    finally:
        store.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]


def test_a_backup_taken_while_the_ledger_is_written_is_one_moment_of_it(
    written: Path, tmp_path: Path
) -> None:
    """Writes go on during the copy (a copy in several steps would start again at each);
    the copy is a whole chain, a prefix of the live one."""
    store = open_store(str(written))
    ledger = Ledger(store)
    done = threading.Event()

    def write() -> None:
        n = 0
        while not done.is_set() or n < 20:
            n += 1
            ledger.dispatch(f"more:{n}", req(f"m{n}")).run("token:n8n")

    writer = threading.Thread(target=write)
    writer.start()
    try:
        code, _, err = cli("backup", str(tmp_path / "copy.db"), "--db", str(written))
    finally:
        done.set()
        writer.join()
        store.dispose()
    assert code == 0, err
    copied = make_store(resolve_url(str(tmp_path / "copy.db")))
    live = open_store(str(written))
    try:
        with copied.reader.connect() as a, live.reader.connect() as b:
            mine = chain.verify(a)
            assert mine.ok and chain.verify(b).ok
            row = b.exec_driver_sql(f"SELECT hash FROM events WHERE seq = {mine.head_seq}")
            assert row.scalar_one() == mine.head_hash
    finally:
        copied.dispose()
        live.dispose()


def test_migrate_backs_up_into_the_directory_first(tmp_path: Path) -> None:
    db = first_schema_ledger(tmp_path)
    folder = tmp_path / "var" / "backups"
    code, out, err = cli("migrate", "--db", str(db), "--backup-dir", str(folder))
    assert code == 0, err
    (copy,) = folder.iterdir()
    assert folder.stat().st_mode & 0o777 == 0o700 and copy.stat().st_mode & 0o777 == 0o600
    assert f"backed up schema version 1 to {copy}" in out and "migrated schema version 1" in out
    assert meta(copy)["schema_version"] == "1" and RESTORED in meta(copy)


def test_migrate_of_a_current_ledger_takes_no_backup(written: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    code, out, _ = cli("migrate", "--db", str(written), "--backup-dir", str(folder))
    assert code == 0 and "nothing to do" in out and "backed up" not in out
    assert not folder.exists()


@pytest.mark.postgres
def test_backup_of_postgres_is_a_pg_dump_archive(pg_url: str, tmp_path: Path) -> None:
    init_ledger(pg_url)[0].dispose()
    code, _, err = cli("backup", str(tmp_path), "--db", pg_url)
    assert code == 0, err
    (copy,) = tmp_path.iterdir()
    assert copy.name.endswith("Z.dump") and copy.read_bytes()[:5] == b"PGDMP"
    assert copy.stat().st_mode & 0o777 == 0o600


@pytest.mark.postgres
def test_a_postgres_backup_prints_the_head_of_exactly_what_it_dumped(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event appended after the head is read and before pg_dump starts is not in the
    dump, nor in the head printed: both are of the one exported snapshot."""
    store, _ = init_ledger(pg_url)
    ledger = Ledger(store)
    ledger.dispatch("invoice:1", req("e1")).run("token:n8n")
    run = backups._run

    def late_write_then(args: list[str], env: dict[str, str]) -> None:
        if args[0] == "pg_dump":
            ledger.dispatch("invoice:late", req("late")).run("token:n8n")
        run(args, env)

    monkeypatch.setattr(backups, "_run", late_write_then)
    try:
        code, out, err = cli("backup", str(tmp_path / "ledger.dump"), "--db", pg_url)
        live = chain.chain_head(store)
    finally:
        store.dispose()
    assert code == 0, err
    printed = out.split("dumped: ")[1].splitlines()[0]
    assert re.fullmatch(r"copied [\d.]+ KiB in [\d.]+ s", out.splitlines()[0]), out
    other, name = make_pg_database()
    try:
        pg_restore("-d", other, str(tmp_path / "ledger.dump"))
        restored = open_store(other)
        try:
            with restored.reader.connect() as conn:
                found = chain.verify(conn)
        finally:
            restored.dispose()
    finally:
        drop_pg_database(name)
    assert found.ok and live[0] == found.head_seq + 1  # the late event is the live one's
    head = f"head seq {found.head_seq} hash {found.head_hash}"
    assert printed == f"{counted(found.checked, 'event')}, {head}"


@pytest.mark.postgres
def test_backup_of_postgres_without_pg_dump_says_what_to_run(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init_ledger(pg_url)[0].dispose()
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli("backup", str(tmp_path), "--db", pg_url)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "pg_dump is not on PATH" in err and "pg_dump -Fc" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_a_postgres_ledger_restored_from_its_dump_says_so_and_the_live_one_does_not(
    pg_url: str, tmp_path: Path
) -> None:
    store, _ = init_ledger(pg_url)
    Ledger(store).dispatch("invoice:1", req("e1")).run("token:n8n")
    store.dispose()
    code, out, err = cli("backup", str(tmp_path / "ledger.dump"), "--db", pg_url)
    assert code == 0, err
    taken = out.split("backup taken at ")[1].split(" written")[0]
    code, out, _ = cli("restored", "--db", pg_url)  # the live one holds only the record
    assert code == 0 and out.startswith("not restored")
    other, name = make_pg_database()
    try:
        pg_restore("-d", other, str(tmp_path / "ledger.dump"))
        code, out, _ = cli("status", "--db", other)
        assert code == 0 and out.startswith(f"RESTORED from a backup taken at {taken}")
        assert cli("backup", str(tmp_path / "again.dump"), "--db", other)[0] == 0
        assert cli("restored", "--db", other)[0] == 1  # a backup of it keeps what it lacks
        code, _, err = cli("restored", "--ack", "--note", "checked", "--db", other)
        assert code == 0, err
        assert cli("restored", "--db", other)[0] == 0
        assert cli("verify", "--deep", "--db", other)[0] == 0
    finally:
        drop_pg_database(name)
    # Put back over the live database itself: its tables are made anew.
    pg_restore("--clean", "-d", pg_url, str(tmp_path / "ledger.dump"))
    assert cli("restored", "--db", pg_url)[0] == 1


def pg_restore(*args: str) -> None:
    done = subprocess.run(["pg_restore", "--no-owner", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
