"""The anchor file's line: written and read back, and each way a line can be wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from flowledger.domain.anchors import Anchor, AnchorError, parse_line

HASH = "ab" * 32


def test_a_line_reads_back_as_the_anchor_it_was() -> None:
    anchor = Anchor(42, HASH, datetime(2026, 11, 2, 9, 15, tzinfo=UTC))
    line = anchor.line()
    assert line == f'{{"at": "2026-11-02T09:15:00+00:00", "hash": "{HASH}", "seq": 42}}\n'
    assert parse_line(line) == anchor


def test_times_are_read_as_utc() -> None:
    naive = parse_line(f'{{"seq": 1, "hash": "{HASH}", "at": "2026-11-02T09:15:00"}}')
    tokyo = parse_line(f'{{"seq": 1, "hash": "{HASH}", "at": "2026-11-02T18:15:00+09:00"}}')
    assert naive.at == tokyo.at == datetime(2026, 11, 2, 9, 15, tzinfo=UTC)
    assert tokyo.at.tzinfo == UTC != timezone(timedelta(hours=9))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("", "not a JSON object"),
        ("[1, 2]", "not a JSON object"),
        ('{"seq": 1, "hash": "' + HASH, "not a JSON object"),  # cut short
        (f'{{"seq": true, "hash": "{HASH}", "at": "2026-11-02T09:15:00Z"}}', "seq must be"),
        (f'{{"seq": "1", "hash": "{HASH}", "at": "2026-11-02T09:15:00Z"}}', "seq must be"),
        (f'{{"seq": 1, "hash": "{HASH.upper()}", "at": "2026-11-02T09:15:00Z"}}', "hash must"),
        (f'{{"seq": 1, "hash": "{HASH}"}}', "at must be an ISO 8601 time"),
        (f'{{"seq": 1, "hash": "{HASH}", "at": "yesterday"}}', "at 'yesterday' is not"),
    ],
)
def test_a_bad_line_says_what_is_wrong(line: str, problem: str) -> None:
    with pytest.raises(AnchorError, match=problem):
        parse_line(line)
