"""A receipt names the target's record of a write; what JavaScript makes of a missing value is
not one (``String(undefined)``, ``String({})``...)."""

from __future__ import annotations

import pytest

from flowledger.domain import limits


@pytest.mark.parametrize(
    "receipt", ["undefined", "null", "[object Object]", "NaN", " undefined ", "", "   "]
)
def test_empty_and_coerced_receipts_are_refused(receipt: str) -> None:
    assert limits.receipt_problem(receipt) is not None


@pytest.mark.parametrize(
    "receipt", ["CRM-991", "0", "false", "Undefined-42", "null-object", "msg:<a@b>", "x" * 1000]
)
def test_real_receipts_are_accepted(receipt: str) -> None:
    assert limits.receipt_problem(receipt) is None


def test_a_coerced_receipt_is_named_in_the_problem() -> None:
    problem = limits.receipt_problem("[object Object]")
    assert problem is not None and "'[object Object]'" in problem
