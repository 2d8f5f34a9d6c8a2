"""The replay behind ``verify --deep`` on events a careful forger could have chained: each is
reported as a problem naming its sequence number, and the replay goes on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flowledger.domain.projection import EventRow, Projection

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


def test_what_a_call_wrote_is_known_from_the_event_that_records_it() -> None:
    """An event that recorded ``deadline`` and ``input_ref`` sets them (``input_ref`` None on
    an existing operation: unchanged); one from before they were recorded makes them unknown
    (absent, so not compared) until a later one records them again."""
    p = Projection()
    created = {"created": True, "attempt": 1, "input_hash": "h", "processing_version": "v1"}
    p.apply(ev(1, "dispatched", "new", {**created, "deadline": None, "input_ref": "r",
                                        "max_attempts": 3}))  # fmt: skip
    p.apply(ev(2, "failed", "new", {"error": "400"}))
    p.apply(ev(3, "dispatched", "new", {"attempt": 2, "deadline": AT.isoformat(),
                                        "input_ref": None}))  # fmt: skip
    values = p.operations["new"].values
    assert (values["max_attempts"], values["deadline"], values["input_ref"]) == (3, AT, "r")
    assert p.attempts[("new", 2)].values["deadline"] == AT
    p.apply(ev(4, "dispatched", "old", created))  # written before it recorded them
    assert not {"max_attempts", "deadline", "input_ref"} & p.operations["old"].values.keys()
    assert "deadline" not in p.attempts[("old", 1)].values
    p.apply(ev(5, "hold_opened", "old", {"reason": "unknown_outcome", "blocking": True}, hold=1))
    assert not {"cause_key", "deadline"} & p.holds[1].values.keys()
    p.apply(ev(6, "hold_resolved", "old", {"resolution": "released_for_retry"}, hold=1))
    assert p.operations["old"].values["deadline"] is None  # a release has always cleared it
    p.apply(ev(7, "dispatched", "old", {"attempt": 2, "deadline": AT.isoformat(),
                                        "input_ref": None}))  # fmt: skip
    assert p.operations["old"].values["deadline"] == AT
    assert "input_ref" not in p.operations["old"].values  # none sent, and never known
    assert not p.problems
