"""Fixtures shared by every test: ledgers on SQLite and on PostgreSQL, and a settable clock.

A ledger the ``store`` fixture opens is a copy of one migrated once per test process (a file
copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL) given an identity of its own, as
``flowledger init`` gives a new ledger: running the migrations for every test cost more than
most tests. The migrations themselves run for real in the tests of migrations and of ``init``,
which start from an empty database (``db_url``, ``pg_url``). PostgreSQL databases are dropped
by one thread in the background: a drop waits for a checkpoint, which the next test need not.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, resolve_url, sqlite_path
from flowledger.storage.migrate import init_ledger
from tests.support.builders import FakeClock
from tests.support.ledgers import copy_template, new_identity

PG_URL = os.environ.get("FLOWLEDGER_TEST_PG_URL")
_pg_skip_reported = False


def pytest_report_header(config: pytest.Config) -> str:
    if PG_URL:
        return f"postgresql: tests run against {PG_URL.split('@')[-1]}"
    return (
        "postgresql: FLOWLEDGER_TEST_PG_URL is not set, PostgreSQL tests are SKIPPED "
        "(.ci/run sets it)"
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _admin() -> sa.Engine:
    assert PG_URL
    return sa.create_engine(
        PG_URL.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )


def _pg_database_url(name: str) -> str:
    assert PG_URL
    return sa.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def make_pg_database(template: str | None = None) -> tuple[str, str]:
    """A fresh database on the test server, empty or a copy of ``template``; returns its URL
    and name."""
    if not PG_URL:
        pytest.skip("PostgreSQL not configured: set FLOWLEDGER_TEST_PG_URL")
    name = f"fl_test_{uuid.uuid4().hex[:12]}"
    admin = _admin()
    with admin.connect() as conn:
        copy = f' TEMPLATE "{template}"' if template else ""
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"{copy}')
    admin.dispose()
    return _pg_database_url(name), name


def drop_pg_database(name: str) -> None:
    admin = _admin()
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


_dropper: ThreadPoolExecutor | None = None
_drops: list[Future[None]] = []
_DROPS_BEHIND = 8


def drop_pg_database_later(name: str) -> None:
    """Drop ``name`` in the background; every drop is done before the session ends."""
    global _dropper
    if _dropper is None:
        _dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-drop")
    _drops.append(_dropper.submit(drop_pg_database, name))
    # At most a few behind: a loaded server drops more slowly than tests make databases.
    while len(_drops) > _DROPS_BEHIND:
        _drops.pop(0).result()


def _finish_drops() -> None:
    for drop in _drops:
        drop.result()
    _drops.clear()


@pytest.fixture(scope="session", autouse=True)
def _pg_drops_finished() -> Iterator[None]:
    """Every database dropped in the background is gone when the session ends."""
    yield
    _finish_drops()


@pytest.fixture(scope="session")
def _pg_template() -> Iterator[str]:
    """A ledger migrated once for this test process, the template of each ``store``'s."""
    url, name = make_pg_database()
    init_ledger(url)[0].dispose()
    yield name
    _finish_drops()
    drop_pg_database(name)


@pytest.fixture
def pg_url() -> Iterator[str]:
    url, name = make_pg_database()
    yield url
    drop_pg_database_later(name)


@pytest.fixture
def pg_ledger(_pg_template: str) -> Iterator[str]:
    """The URL of a new ledger on PostgreSQL: a copy of the template with an identity of its
    own, as ``store`` makes on PostgreSQL, for a test that runs it in child processes."""
    url, name = make_pg_database(_pg_template)
    store, _ = init_ledger(url)
    new_identity(store)
    store.dispose()
    yield url
    drop_pg_database_later(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.db")


# Databases the fixtures copied from a template, still to be given an identity of their own.
_copies: set[str] = set()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh ledger database URL on each backend: not yet created, unless the test also
    uses ``store`` (then it is that store's ledger)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    if not PG_URL:
        pytest.skip("PostgreSQL not configured: set FLOWLEDGER_TEST_PG_URL")
    template = request.getfixturevalue("_pg_template") if "store" in request.fixturenames else None
    url, name = make_pg_database(template)
    if template:
        _copies.add(url)
    yield url
    drop_pg_database_later(name)


@pytest.fixture
def store(request: pytest.FixtureRequest, db_url: str) -> Iterator[Store]:
    """A new ledger at ``db_url``: a copy of the template where ``db_url`` is a SQLite file not
    yet made or a PostgreSQL copy made for it, else migrated there (a ``db_url`` of a test
    module's own)."""
    path = sqlite_path(resolve_url(db_url))
    if path is not None and not path.exists():
        copy_template(path)
        _copies.add(db_url)
    store, _ = init_ledger(db_url)  # a copy is opened as it is
    if db_url in _copies:
        _copies.discard(db_url)
        new_identity(store)
    yield store
    store.dispose()


@pytest.fixture
def ledger(store: Store, clock: FakeClock) -> Ledger:
    return Ledger(store, clock=clock)
