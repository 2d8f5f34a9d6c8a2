"""What the services accept and answer, their two errors, and the checks on ids: plain values
shared by the writer (:mod:`flowledger.services.ledger`, :mod:`flowledger.services.holds`) and its
callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flowledger import domain
from flowledger.domain import NewHold, limits
from flowledger.domain.records import direct_init


class NotFound(LookupError):
    """The operation or hold named does not exist."""


class InvalidInput(ValueError):
    """A value the ledger refuses; ``field`` names it for the caller."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _refuse(problem: str | None, field: str) -> None:
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field)


def check_id(value: str, field: str) -> str:
    _refuse(limits.id_problem(value), field)
    return value


def check_operation_id(value: str) -> str:
    """The id of an operation to create or change: an id, without an empty segment or one a
    missing value became (:func:`~flowledger.domain.limits.operation_id_problem`)."""
    _refuse(limits.operation_id_problem(value), "operation_id")
    return value


def check_optional(values: dict[str, Any]) -> None:
    """Optional names (workflow, step, source, approval version) follow the id rule;
    ``input_ref`` may be longer (a URL) but not unbounded."""
    for field_name, value in values.items():
        if value is None:
            continue
        if field_name == "input_ref":
            _refuse(
                limits.text_problem(value, limits.MAX_INPUT_REF_LENGTH, empty=False), field_name
            )
        else:
            check_id(value, field_name)


def check_receipt(value: str) -> None:
    _refuse(limits.receipt_problem(value), "receipt")


def check_detail(value: str | None) -> None:
    if value is not None:
        _refuse(limits.text_problem(value, limits.MAX_DETAIL_LENGTH), "detail")


def check_note(value: str) -> str:
    """A person's note: required (``note_required`` is the domain's refusal) and bounded."""
    _refuse(limits.text_problem(value, limits.MAX_NOTE_LENGTH), "note")
    return value


def check_run_index(value: int | None) -> None:
    if value is not None:
        _refuse(limits.run_index_problem(value), "run_index")


def operator_actor(operator: str) -> str:
    """How a person's decisions are signed in the event log."""
    return f"operator:{check_id(operator, 'operator')}"


@direct_init
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
class HoldTarget:
    """A hold to open and what it concerns; an overdue hold ``refers_to`` the hold it is
    about."""

    hold: NewHold
    operation_id: str | None = None
    execution_id: str | None = None
    source: str | None = None
    refers_to: int | None = None


@direct_init
@dataclass(frozen=True)
class Answer:
    """What the ledger tells a workflow."""

    operation_id: str
    state: str
    decision: str | None = None
    attempt: int = 0
    reason: str | None = None
    receipt: str | None = None
    hold_ids: list[int] = field(default_factory=list)  # the holds this call opened
    hold_id: int | None = None  # a dispatch answered hold: the open hold of its reason

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its values (the receiver's writer process sends answers back so).
        return Answer, (
            self.operation_id, self.state, self.decision, self.attempt, self.reason,
            self.receipt, self.hold_ids, self.hold_id,
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation_id": self.operation_id,
            "decision": self.decision,
            "state": self.state,
            "attempt": self.attempt,
            "reason": self.reason,
            "receipt": self.receipt,
            "hold_id": self.hold_id,
        }
