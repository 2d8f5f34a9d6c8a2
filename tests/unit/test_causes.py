"""Cause keys pinned as text: the keys are stored in every ledger, so each reason's key must
stay byte for byte what it is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flowledger.domain import OpenHold, Reason
from flowledger.domain.causes import (
    PARTS,
    cause_key,
    new_hold,
    one_per_reason,
    part_text,
    with_evidence,
)

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
T0_TEXT = "2026-11-02T09:00:00+00:00"
OP_ID = "invoice:INV-42:send"


KEYS = [
    (
        Reason.UNKNOWN_OUTCOME,
        {"operation_id": OP_ID, "attempt": 2},
        f"unknown_outcome:{OP_ID}:2",
    ),
    (
        Reason.EXECUTION_FAILED,
        {"operation_id": OP_ID, "attempt": 2, "execution_id": "exec-9"},
        f"execution_failed:{OP_ID}:2:exec-9",
    ),
    (
        Reason.RECEIPT_CONFLICT,
        {"operation_id": OP_ID, "receipt": "R-2"},
        f"receipt_conflict:{OP_ID}:R-2",
    ),
    (
        Reason.INPUT_MISMATCH,
        {"operation_id": OP_ID, "input_hash": "sha256:" + "b" * 64},
        f"input_mismatch:{OP_ID}:sha256:{'b' * 64}",
    ),
    (
        Reason.VERSION_MISMATCH,
        {"operation_id": OP_ID, "processing_version": "v2"},
        f"version_mismatch:{OP_ID}:v2",
    ),
    (
        Reason.APPROVAL_EXPIRED,
        {"operation_id": OP_ID, "expires_at": T0},
        f"approval_expired:{OP_ID}:{T0_TEXT}",
    ),
    (
        Reason.APPROVAL_VERSION,
        {"operation_id": OP_ID, "approval_version": "v0", "processing_version": "v1"},
        f"approval_version:{OP_ID}:v0:v1",
    ),
    (Reason.MAX_ATTEMPTS, {"operation_id": OP_ID, "attempt": 5}, f"max_attempts:{OP_ID}:5"),
    (Reason.STALE_PREPARED, {"operation_id": OP_ID, "attempt": 0}, f"stale_prepared:{OP_ID}:0"),
    (
        Reason.EXECUTION_STUCK,
        {"source": "prod-n8n", "execution_id": "981"},
        "execution_stuck:prod-n8n:981",
    ),
    (Reason.OVERDUE, {"hold_id": 7, "deadline": T0}, f"overdue:7:{T0_TEXT}"),
    (
        Reason.SOURCE_STALE,
        {"source": "prod-n8n", "since": "never"},
        "source_stale:prod-n8n:never",
    ),
]


@pytest.mark.parametrize(("reason", "parts", "expected"), KEYS, ids=[r.value for r, _, _ in KEYS])
def test_each_reason_has_its_stored_key(
    reason: Reason, parts: dict[str, str | int | datetime], expected: str
) -> None:
    assert cause_key(reason, **parts) == expected


def test_every_reason_that_opens_a_hold_has_a_key() -> None:
    assert set(PARTS) == set(Reason) - {Reason.IN_FLIGHT, Reason.CANCELLED}


def test_parts_are_written_in_the_tables_order_whatever_order_they_are_passed_in() -> None:
    key = cause_key(Reason.EXECUTION_FAILED, execution_id="exec-9", attempt=2, operation_id="op-1")
    assert key == "execution_failed:op-1:2:exec-9"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(T0, T0_TEXT), (0, "0"), (42, "42"), ("a:b", "a:b"), ("", "")],
)
def test_a_time_is_written_in_iso_8601_and_anything_else_as_text(
    value: str | int | datetime, expected: str
) -> None:
    assert part_text(value) == expected


@pytest.mark.parametrize(
    ("parts", "given"),
    [
        ({"operation_id": "op-1"}, "('operation_id',)"),
        (
            {"operation_id": "op-1", "attempt": 1, "receipt": "R"},
            "('operation_id', 'attempt', 'receipt')",
        ),
        ({"attempt": 1, "execution_id": "e"}, "('attempt', 'execution_id')"),
    ],
    ids=["missing", "extra", "wrong"],
)
def test_a_key_is_refused_unless_given_exactly_its_named_parts(
    parts: dict[str, str | int], given: str
) -> None:
    with pytest.raises(TypeError) as raised:
        cause_key(Reason.UNKNOWN_OUTCOME, **parts)
    assert str(raised.value) == (
        f"unknown_outcome cause key takes ('operation_id', 'attempt'), got {given}"
    )


R2 = OpenHold(7, Reason.RECEIPT_CONFLICT, True, f"receipt_conflict:{OP_ID}:R-2")
INPUT = OpenHold(8, Reason.INPUT_MISMATCH, False, f"input_mismatch:{OP_ID}:sha256:aa")


@pytest.mark.parametrize(
    ("receipt", "holds", "opened", "evidence_for"),
    [
        ("R-3", [], True, None),  # the first conflict opens its hold
        ("R-3", [INPUT, R2], False, 7),  # a further one is evidence for the open one
        ("R-2", [R2], True, None),  # the same cause: left to its cause key, a no-op
        ("R-3", [INPUT], True, None),  # another reason's hold does not count
    ],
    ids=["first", "further", "same-cause", "other-reason"],
)
def test_an_operation_has_one_open_hold_per_reason(
    receipt: str, holds: list[OpenHold], opened: bool, evidence_for: int | None
) -> None:
    hold = new_hold(Reason.RECEIPT_CONFLICT, "differs", operation_id=OP_ID, receipt=receipt)
    new, evidence = one_per_reason(hold, holds)
    assert new == ((hold,) if opened else ())
    assert evidence == (((evidence_for, hold),) if evidence_for is not None else ())


def test_evidence_is_added_to_the_detail_within_its_length() -> None:
    assert with_evidence("R-2 differs", "R-3 differs") == "R-2 differs; also R-3 differs"
    assert len(with_evidence("x" * 1990, "y" * 50)) == 2000
