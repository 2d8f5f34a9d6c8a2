"""Times bound by hand (the writer's driver SQL) are stored exactly as SQLAlchemy stores them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ledger.storage.models import UTCDateTime, time_binder

TIMES = [
    datetime(2026, 11, 1, tzinfo=UTC),
    datetime(2026, 11, 1, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(999, 3, 4, 5, 6, 7, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(2026, 3, 29, 2, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 1, 1, 0, 0, 0, 500, tzinfo=timezone(timedelta(hours=-7))),
    None,
]


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.psycopg.dialect()])
@pytest.mark.parametrize("value", TIMES)
def test_hand_bound_time_is_the_core_bound_time(dialect: sa.Dialect, value: datetime) -> None:
    core = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    expected = core(value) if core else value
    assert time_binder(dialect)(value) == expected


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.psycopg.dialect()])
def test_a_naive_time_is_refused(dialect: sa.Dialect) -> None:
    with pytest.raises(ValueError, match="naive"):
        time_binder(dialect)(datetime(2026, 11, 1))
