"""Times bound by hand (the writer's driver SQL) are stored exactly as SQLAlchemy stores them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from flowledger.storage.models import UTCDateTime, from_db_time, time_binder

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


@pytest.mark.parametrize("value", [t for t in TIMES if t is not None])
def test_a_time_stored_on_sqlite_reads_back_as_the_same_instant(value: datetime) -> None:
    """What SQLite keeps (naive UTC text, its microseconds or none) is read back by
    :func:`from_db_time` and by SQLAlchemy's own result processing as the same aware UTC time,
    and as what the general parse gives."""
    dialect = sqlite.dialect()
    stored = time_binder(dialect)(value)
    assert isinstance(stored, str)
    for text in (stored, stored.removesuffix(".000000")):
        read = from_db_time(text)
        assert read == value and read is not None and read.tzinfo is UTC
        assert UTCDateTime().result_processor(dialect, None)(text) == read


@pytest.mark.parametrize(
    "text",
    ["2026-10-30T12:00+02", "2026-10-30 12:00:00Z", "2026-10-30 12:00:00+02:00", "2026-10-30"],
)
def test_a_stored_text_with_an_offset_of_its_own_keeps_it(text: str) -> None:
    """Texts as long as SQLite's naive forms but carrying an offset (or none of a time) are
    read by the general parse, never with a second offset appended."""
    expected = datetime.fromisoformat(text)
    expected = expected.replace(tzinfo=UTC) if expected.tzinfo is None else expected
    assert from_db_time(text) == expected
