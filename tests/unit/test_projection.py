"""The replay behind ``verify --deep`` on events a careful forger could have chained: each is
reported as a problem naming its sequence number, and the replay goes on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ledger.domain.projection import EventRow, Projection

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def ev(
    seq: int, kind: str, op: str | None, data: dict[str, Any], hold: int | None = None
) -> EventRow:
    return EventRow(seq, AT, "token:n8n", kind, op, hold, data)


def test_events_the_writer_could_not_have_written_are_problems_not_crashes() -> None:
    p = Projection()
    p.apply(ev(1, "prepared", None, {"input_hash": "h", "processing_version": "v1"}))
    p.apply(ev(2, "dispatched", "op", {"created": True, "attempt": "two"}))
    p.apply(ev(3, "confirmed", "ghost", {"receipt": "R"}))
    p.apply(ev(4, "hold_extended", "op", {"deadline": "soon"}, hold=9))
    p.apply(ev(5, "hold_opened", "op", {"reason": "unknown_outcome"}, hold=7))
    p.apply(ev(6, "hold_extended", "op", {"deadline": "soon"}, hold=7))
    p.apply(ev(7, "prepared", "op", {}))
    assert [seq for seq, _ in p.problems] == [1, 2, 3, 4, 6, 7]
    assert p.problems[2] == (
        3,
        "confirmed concerns operation ghost, which no earlier event created",
    )
    assert p.problems[3] == (4, "hold_extended concerns hold 9, never opened")
    assert p.problems[5] == (7, "creates operation op a second time")
    assert p.holds[7].values["reason"] == "unknown_outcome"  # the replay went on
