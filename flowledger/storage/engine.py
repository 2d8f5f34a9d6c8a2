"""Opening a ledger database: the engine factory, and the checks that refuse a wrong file.

SQLite is the embedded default (WAL, ``synchronous=FULL``, ``busy_timeout``, ``BEGIN IMMEDIATE``
for writes, foreign keys on); PostgreSQL is the scale-out path. Only ``init`` creates a database:
every other entry point opens an existing file read-write without creating one, and checks the
schema version before it touches anything.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url

from flowledger.storage.models import SCHEMA_VERSION, LedgerMeta, table
from flowledger.storage.problems import LedgerError as LedgerError

DEFAULT_DB = "./var/flowledger.db"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000
PRIVATE_FILE = 0o600  # the database and its -wal and -shm: the owner only
PRIVATE_DIR = 0o700  # a directory the ledger creates for its database
# libpq's bounds on a PostgreSQL connection, each overridden by the same name in the URL's
# query (``?connect_timeout=10``): how long a connection may take to open (seconds), how long
# sent data may stay unacknowledged (ms), and TCP keepalives on an idle connection (a probe
# after 30 s, every 10 s, 3 missed: dropped), so that a partition or a host gone ends a
# connection rather than leave it waiting. A server that stops answering while its host's TCP
# stack still acknowledges (a stalled disk, a stopped process) is the writer's deadline's to
# bound: :mod:`flowledger.storage.deadline`.
PG_TIMEOUTS = {
    "connect_timeout": 5,
    "tcp_user_timeout": 30_000,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


def sqlite_version_tuple(version: str = sqlite3.sqlite_version) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def wal_reset_affected(version: str = sqlite3.sqlite_version) -> bool:
    """SQLite 3.7.0 to 3.51.2 (but 3.44.6 and 3.50.7) can corrupt a WAL database when one
    connection checkpoints while another commits or checkpoints (the "WAL-reset bug")."""
    v = sqlite_version_tuple(version)
    return (3, 7, 0) <= v <= (3, 51, 2) and v not in ((3, 44, 6), (3, 50, 7))


WAL_RESET_AFFECTED = wal_reset_affected()
CHECKPOINT_EVERY = 1000  # commits between two explicit checkpoints on an affected build


@dataclass
class ChainHint:
    """The chain head this process last wrote: a guess that saves the writer a read. A
    writer appends after it with a compare-and-set on the head's sequence number, and reads
    the head only when the guess is stale (another process, or a rolled-back transaction)."""

    seq: int | None = None
    hash: str = ""


@dataclass(frozen=True)
class Store:
    """The engines of one open ledger: ``engine`` writes (``BEGIN IMMEDIATE`` on SQLite),
    ``reader`` reads (a deferred transaction that never blocks a writer)."""

    engine: Engine
    reader: Engine
    url: URL
    chain_hint: ChainHint = field(default_factory=ChainHint, compare=False, repr=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def dispose(self) -> None:
        if WAL_RESET_AFFECTED and self.dialect == "sqlite":
            # A busy or broken file: the next process to close the ledger checkpoints instead.
            with contextlib.suppress(Exception):
                self.checkpoint()
        self.engine.dispose()

    def checkpoint(self) -> bool:
        """Copy the WAL back into the database file while holding the writer lock, so that
        no commit can race it; returns whether all of it was copied (always True on
        PostgreSQL, where this does nothing).

        One connection takes the writer lock (``BEGIN IMMEDIATE``, waiting for another
        writer as a commit does) and a second checkpoints ``PASSIVE`` meanwhile: as much
        as no reader still needs, without waiting for readers. ``FULL`` would hold the
        writer lock and wait up to the busy timeout for each reader on an older snapshot
        (a backup is one, for as long as it copies), stalling every commit behind it; and
        when it could not get the lock in time it carries on as ``PASSIVE`` without it. A
        checkpoint left short by a reader is done at the next one."""
        if self.dialect != "sqlite":
            return True
        with self.engine.connect() as holder, self.engine.connect() as conn:
            lock = holder.connection.driver_connection
            raw = conn.connection.driver_connection
            assert lock is not None and raw is not None
            lock.execute("BEGIN IMMEDIATE")
            try:
                busy, log, copied = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                lock.execute("ROLLBACK")
        return not busy and copied == log


def resolve_url(db: str | None) -> URL:
    """A path or an SQLAlchemy URL; ``None`` means ``$FLOWLEDGER_DB`` or the default path."""
    value = db or os.environ.get("FLOWLEDGER_DB") or DEFAULT_DB
    if "://" in value:
        try:
            url = make_url(value)
        except sa.exc.ArgumentError as exc:
            raise LedgerError(f"not a database URL: {hide_password_text(value)}") from exc
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        if not url.drivername.startswith(("sqlite", "postgresql")):
            raise LedgerError(
                f"unsupported database {url.drivername!r}: use a SQLite path or a postgresql:// URL"
            )
        return url
    return URL.create("sqlite", database=str(Path(value).expanduser().absolute()))


def url_secrets(url: URL) -> list[str]:
    """The password a database URL carries (``user:PASSWORD@host``, or a ``password`` query
    parameter), for the redactor: a driver's error, or a target's that a workflow passes on,
    can repeat it, decoded or as the URL spells it (percent-encoded). A user or host name
    is not a secret."""
    found = [url.password] if isinstance(url.password, str) else []
    query = url.query.get("password")
    found.extend([query] if isinstance(query, str) else list(query or ()))
    return [form for v in found if v for form in dict.fromkeys((v, quote(v, safe="")))]


def hide_password(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def hide_password_text(text: str) -> str:
    try:
        return hide_password(make_url(text))
    except Exception:
        return "<unparseable URL>"


def sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite":
        return None
    if not url.database or url.database == ":memory:":
        raise LedgerError("an in-memory SQLite ledger would be lost on exit; give a file path")
    return Path(url.database)


def make_store(url: URL, *, create: bool = False) -> Store:
    """Build the engines for ``url``. Without ``create`` a missing SQLite file is an error."""
    path = sqlite_path(url)
    if path is not None:
        _check_sqlite_file(path, create=create)
        engine = _sqlite_engine(path, create=create)
    else:
        engine = sa.create_engine(
            url,
            hide_parameters=True,  # database errors never echo the values they were given
            pool_pre_ping=True,
            pool_size=10,
            max_overflow=20,
            # prepare_threshold out of reach: psycopg would otherwise prepare a statement
            # after five runs, and PostgreSQL may keep the generic plan it made while a table
            # was small (a sequential scan), which turns a growing backfill quadratic. Not
            # None, which would refuse the writer's own few prepared statements too
            # (``Tx.execute(prepare=True)``).
            connect_args={
                "application_name": "flowledger",
                "prepare_threshold": 2**31 - 1,
                **{k: v for k, v in PG_TIMEOUTS.items() if k not in url.query},
            },
        )
    reader = engine.execution_options(flowledger_read=True)
    return Store(engine=engine, reader=reader, url=url)


def _create_private(path: Path) -> None:
    """An empty database file readable by its owner only (0600), in a directory it creates
    owner-only (0700), whatever the umask. SQLite gives the ``-wal`` and ``-shm`` files it makes
    later the database file's mode."""
    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(PRIVATE_DIR)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def sqlite_files(path: Path) -> tuple[Path, ...]:
    """A SQLite ledger's files: the database, its ``-wal`` and its ``-shm``."""
    return (path, Path(f"{path}-wal"), Path(f"{path}-shm"))


def shared_files(path: Path) -> list[str]:
    """The ledger's files (the database, ``-wal``, ``-shm``) that others than the owner may
    read or write, as ``name (mode)``."""
    found = []
    for name in sqlite_files(path):
        try:
            mode = name.stat().st_mode & 0o777
        except FileNotFoundError:
            continue
        if mode & 0o077:
            found.append(f"{name.name} ({mode:04o})")
    return found


def _check_sqlite_file(path: Path, *, create: bool) -> None:
    if path.is_dir():
        raise LedgerError(f"{path} is a directory, not a ledger database")
    if not path.exists():
        if create:
            _create_private(path)
            return
        raise LedgerError(f"no ledger at {path}; run `flowledger init --db {path}` to create one")
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}") from exc
    if header != SQLITE_HEADER and not (create and header == b""):
        raise LedgerError(f"{path} is not a SQLite database")


def _sqlite_engine(path: Path, *, create: bool) -> Engine:
    mode = "rwc" if create else "rw"  # rw: never create a file behind the caller's back

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"file:{path}?mode={mode}",
            uri=True,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        if WAL_RESET_AFFECTED:
            # No connection checkpoints on its own after a commit; the ledger checkpoints
            # while it holds the writer lock (Store.checkpoint), so no commit can race it.
            conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    engine = sa.create_engine(
        "sqlite://",
        creator=connect,
        hide_parameters=True,
        # Every transaction ends in an explicit commit or rollback (flowledger.storage.tx), so the
        # pool
        # need not roll back again on each return.
        pool_reset_on_return=None,
        pool_size=8,
        max_overflow=16,
        poolclass=sa.pool.QueuePool,
    )

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: sa.Connection) -> None:
        # pysqlite's own transaction handling is off (isolation_level=None); take the write
        # lock at BEGIN so that a read-then-write transaction never fails half-way with BUSY.
        options = conn.get_execution_options()
        if options.get("flowledger_begun"):  # a writer's Tx already began it on the driver
            return
        if options.get("flowledger_read"):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def read_schema_version(engine: Engine) -> int | None:
    meta = table(LedgerMeta)
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("ledger_meta"):
            return None
        value = conn.execute(
            sa.select(meta.c.value).where(meta.c.key == "schema_version")
        ).scalar_one_or_none()
    return int(value) if value is not None else None


def open_store(db: str | None) -> Store:
    """Open an existing ledger whose schema this program knows, or raise a one-line error."""
    url = resolve_url(db)
    store = make_store(url)
    try:
        check_schema(store)
    except BaseException:
        store.dispose()
        raise
    return store


def check_schema(store: Store) -> None:
    """Refuse, in one line, a database that is not a ledger of the schema this program knows."""
    where = _where(store.url)
    try:
        version = read_schema_version(store.reader)  # never waits for the write lock
    except sa.exc.OperationalError as exc:
        raise LedgerError(f"cannot open {where}: {first_line(exc)}") from exc
    except sa.exc.DatabaseError as exc:
        raise LedgerError(f"{where} is not a ledger database: {first_line(exc)}") from exc
    problem = schema_problem(store.url, version)
    if problem is not None:
        raise LedgerError(problem)


def schema_problem(url: URL, version: int | None, known: int = SCHEMA_VERSION) -> str | None:
    """The line every process refuses a ledger of schema ``version`` with (None: the schema
    ``known``, this program's own): none is no ledger, a newer one needs a newer flowledger,
    an older one ``migrate``."""
    where = _where(url)
    if version is None:
        return f"{where} holds no ledger; run `flowledger init` to create one"
    if version > known:
        return (
            f"{where} has schema version {version}, newer than this flowledger knows "
            f"({known}); upgrade flowledger"
        )
    if version < known:
        return (
            f"{where} has schema version {version}, this flowledger needs {known}; "
            "run `flowledger migrate`"
        )
    return None


def _where(url: URL) -> str:
    path = sqlite_path(url)
    return str(path) if path is not None else hide_password(url)


def first_line(exc: BaseException) -> str:
    """A database error in one line: its driver's message's first line, or its type's name."""
    orig: Any = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__
