"""What the services accept and answer, their two errors, and the checks on ids: plain values
shared by the writer (:mod:`ledger.writer.services`, :mod:`ledger.writer.holds`) and its callers."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ledger import domain
from ledger.domain import NewHold

Clock = Callable[[], datetime]
_PRINTABLE_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


class NotFound(LookupError):
    """The operation or hold named does not exist."""


class InvalidInput(ValueError):
    """A value the ledger refuses; ``field`` names it for the caller."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def utcnow() -> datetime:
    return datetime.now(UTC)


def check_id(value: str, field: str) -> str:
    if not isinstance(value, str) or not _PRINTABLE_ID.match(value) or not _encodable(value):
        raise InvalidInput(
            f"{field} must be 1 to {domain.MAX_ID_LENGTH} printable characters", field
        )
    return value


def _encodable(value: str) -> bool:
    """A lone surrogate passes JSON but no database can store it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_optional(values: dict[str, Any]) -> None:
    """Optional names (workflow, step, source, approval version) follow the id rule;
    ``input_ref`` may be longer (a URL) but not unbounded."""
    for field_name, value in values.items():
        if value is None:
            continue
        if field_name == "input_ref":
            if not isinstance(value, str) or not 0 < len(value) <= 1000:
                raise InvalidInput("input_ref must be 1 to 1000 characters", field_name)
        else:
            check_id(value, field_name)


@dataclass(frozen=True)
class DispatchInput:
    """What a workflow sends before its write."""

    processing_version: str
    execution_id: str
    input: Any = None
    input_hash: str | None = None
    has_input: bool = False
    workflow_id: str | None = None
    step: str | None = None
    run_index: int | None = None
    source: str | None = None
    deadline: datetime | None = None
    approval: domain.Approval | None = None
    input_ref: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What one unit of a :meth:`Ledger.run_many` batch returned, or the error it raised."""

    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class HoldTarget:
    """A hold to open and what it concerns; an overdue hold ``refers_to`` the hold it is
    about."""

    hold: NewHold
    operation_id: str | None = None
    execution_id: str | None = None
    source: str | None = None
    refers_to: int | None = None


@dataclass(frozen=True)
class Answer:
    """What the ledger tells a workflow."""

    operation_id: str
    state: str
    decision: str | None = None
    attempt: int = 0
    reason: str | None = None
    receipt: str | None = None
    hold_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "decision": self.decision,
            "state": self.state,
            "attempt": self.attempt,
            "reason": self.reason,
            "receipt": self.receipt,
        }
