"""Fixtures shared by every test: ledgers on SQLite and on PostgreSQL, and a settable clock."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.migrate import init_ledger
from tests.support.builders import FakeClock

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


def make_pg_database() -> tuple[str, str]:
    """A fresh, empty database on the test server; returns its URL and name."""
    if not PG_URL:
        pytest.skip("PostgreSQL not configured: set FLOWLEDGER_TEST_PG_URL")
    name = f"fl_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(
        PG_URL.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    url = sa.make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    return url, name


def drop_pg_database(name: str) -> None:
    assert PG_URL
    admin = sa.create_engine(
        PG_URL.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture
def pg_url() -> Iterator[str]:
    url, name = make_pg_database()
    yield url
    drop_pg_database(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.db")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh ledger database URL (not yet created) on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    url, name = make_pg_database()
    yield url
    drop_pg_database(name)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    store, _ = init_ledger(db_url)
    yield store
    store.dispose()


@pytest.fixture
def ledger(store: Store, clock: FakeClock) -> Ledger:
    return Ledger(store, clock=clock)
