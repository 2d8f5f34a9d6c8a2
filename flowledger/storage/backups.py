"""Copies of a ledger that can be put back: SQLite through its online backup API,
PostgreSQL through ``pg_dump``; each written aside, fsynced, checked, and only then given its
name.

A dump is taken of one snapshot that the ledger's own transaction exports, in which the
chain's head is read: the head printed is the head of exactly what was dumped, as SQLite's
``verify`` of its copy prints the copy's.

A SQLite copy carries the mark of a restore in its own ``ledger_meta``
(:data:`~flowledger.storage.reads.meta.RESTORED`: when it was taken). The live ledger never
holds it, so whatever puts the copy back (``cp`` will do) gives a ledger that knows it was
restored, and from when, until a person acknowledges it. A dump cannot be changed once
written: before ``pg_dump`` reads a PostgreSQL ledger, the ledger records the backup and
which database it is of (:data:`~flowledger.storage.reads.meta.BACKUP_OF`); a database
``pg_restore`` fills is another one, and so knows it was restored. A backup that dies half-way
leaves only that record in the live ledger, which says nothing there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa

from flowledger.domain.times import for_machines
from flowledger.plumbing.faults import crashpoint
from flowledger.storage import meta
from flowledger.storage.engine import PRIVATE_FILE, Store, sqlite_path
from flowledger.storage.problems import LedgerError
from flowledger.storage.reads import Connection, chain
from flowledger.storage.reads.meta import RESTORED

# What checks a copy before it is given its name: raises LedgerError when it is not sound.
Check = Callable[[Connection], None]


@dataclass(frozen=True)
class Head:
    """The chain in a dump: how many events it holds, and its head's sequence number and
    hash."""

    events: int
    seq: int
    hash: str


def file_name(taken_at: datetime, postgres: bool) -> str:
    """A copy's name in a directory of copies, sorted by when it was taken."""
    stamp = taken_at.strftime("%Y%m%dT%H%M%SZ")
    return f"flowledger-{stamp}.{'dump' if postgres else 'db'}"


def destination(dest: Path, taken_at: datetime, postgres: bool) -> Path:
    """``dest`` itself, or a file named for ``taken_at`` in it when it is a directory; a
    file already there is refused (a copy never replaces another)."""
    if dest.is_dir():
        dest = dest / file_name(taken_at, postgres)
    if dest.exists():
        raise LedgerError(f"{dest} exists already; give another name")
    if not dest.parent.is_dir():
        raise LedgerError(f"no directory {dest.parent} to write {dest.name} in")
    return dest


def back_up(
    store: Store,
    dest: Path,
    taken_at: datetime,
    check: Check | None,
    copied: Callable[[float, int], None] = lambda seconds, size: None,
) -> Head | None:
    """Copy the ledger to ``dest`` (a file that does not exist): written to a private file
    beside it, fsynced, checked by ``check`` (SQLite; None: only SQLite's own integrity
    check, for a schema this flowledger cannot read), renamed into place, the directory
    fsynced. Nothing is left under ``dest``'s name when any step fails. ``copied`` is told
    the seconds the copy itself took (the database read) and its size, before the checks.
    Returns the chain in a PostgreSQL dump (None for SQLite: ``check`` reads the copy)."""
    partial = dest.with_name(f".{dest.name}.partial")
    started = time.perf_counter()
    dumped = None
    if sqlite_path(store.url) is None:
        dumped = _dump(store, partial, taken_at)
    else:
        _copy_sqlite(store, partial, taken_at)
    try:
        copied(time.perf_counter() - started, partial.stat().st_size)
        if sqlite_path(store.url) is not None:
            with reading(partial) as conn:
                _integrity(conn)
                if check is not None:
                    check(conn)
        crashpoint("backup_before_rename")
        os.replace(partial, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise
    _fsync(dest.parent)  # the rename itself
    return dumped


def _private(path: Path) -> int:
    """A new file readable by its owner only, whatever the umask."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        raise LedgerError(
            f"{path} exists: another backup is writing, or one was killed; remove it if not"
        ) from None
    except OSError as exc:
        raise LedgerError(f"cannot create {path}: {exc.strerror}") from None
    os.fchmod(fd, PRIVATE_FILE)
    return fd


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _copy_sqlite(store: Store, partial: Path, taken_at: datetime) -> None:
    """The whole database in ONE step of the backup API: one read of one WAL snapshot, which
    writers never restart (a copy in several steps starts again whenever another connection
    commits) and which never holds the writer lock. Then the mark, and a copy of one file
    (rollback journal, no ``-wal``)."""
    os.close(_private(partial))
    try:
        target = sqlite3.connect(partial, isolation_level=None)
        try:
            with store.reader.connect() as conn:
                source = conn.connection.driver_connection
                assert isinstance(source, sqlite3.Connection)
                source.backup(target, pages=-1)
            # A copy of a restored ledger not yet acknowledged keeps the earlier time: what
            # that ledger lacks, its copy lacks too.
            target.execute(
                "INSERT OR IGNORE INTO ledger_meta (key, value) VALUES (?, ?)",
                (RESTORED, for_machines(taken_at)),
            )
            target.execute("PRAGMA journal_mode = DELETE")
        finally:
            target.close()
        _fsync(partial)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        if isinstance(exc, sqlite3.Error):
            raise LedgerError(f"the backup failed: {exc}") from None
        raise


@contextmanager
def reading(path: Path) -> Iterator[Connection]:
    """A read-only connection to a copy (one snapshot for all its reads)."""
    engine = sa.create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True),
        poolclass=sa.pool.NullPool,
    )
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _integrity(conn: Connection) -> None:
    found = conn.exec_driver_sql("PRAGMA quick_check").scalars().all()
    if found != ["ok"]:
        raise LedgerError(f"the copy fails SQLite's integrity check: {found[0]}")


def _dump(store: Store, partial: Path, taken_at: datetime) -> Head:
    """The backup recorded in the ledger, then ``pg_dump -Fc`` into ``partial`` of the
    snapshot the chain's head is read in, then ``pg_restore --list`` reads it back whole."""
    for tool in ("pg_dump", "pg_restore"):
        if shutil.which(tool) is None:
            raise LedgerError(
                f"{tool} is not on PATH: install PostgreSQL's client tools (the server's "
                f"major version or newer), or run pg_dump -Fc -f FILE DBNAME yourself"
            )
    url = store.url.set(drivername="postgresql", password=None)
    env = dict(os.environ)
    if store.url.password:
        env["PGPASSWORD"] = str(store.url.password)
    os.close(_private(partial))
    try:
        meta.stamp_backup(store, taken_at)
        with _exported(store) as (snapshot, head):
            dump = ["pg_dump", "-Fc", "--no-password", f"--snapshot={snapshot}"]
            _run([*dump, "-f", str(partial), "-d", _libpq(url)], env)
        _fsync(partial)
        _run(["pg_restore", "--list", str(partial)], env)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
        raise
    return head


@contextmanager
def _exported(store: Store) -> Iterator[tuple[str, Head]]:
    """A REPEATABLE READ transaction's snapshot, exported for ``pg_dump --snapshot``, and the
    chain's head read in it (after the backup's record, committed before it began). The
    snapshot lives only as long as the transaction: it ends when the dump has been read."""
    with chain.snapshot(store) as conn, conn.begin():
        exported = conn.execute(sa.text("SELECT pg_export_snapshot()")).scalar_one()
        seq, digest = chain.head(conn)
        events = conn.execute(sa.select(sa.func.count()).select_from(chain.EVENTS)).scalar_one()
        yield str(exported), Head(int(events), seq, digest)


def _libpq(url: sa.URL) -> str:
    return url.render_as_string(hide_password=False)


def _run(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise LedgerError(f"{args[0]} failed: {said}")
