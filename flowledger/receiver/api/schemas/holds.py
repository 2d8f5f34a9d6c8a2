"""What the hold routes accept and show: a person's action on a hold (always with a note, and
the values that action needs) and the hold as the ledger keeps it."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StrictBool

from flowledger.domain import limits
from flowledger.receiver.api.schemas.fields import Accepts, Id, Receipt, Text, Time, When

Note = Annotated[
    Text,
    Field(
        min_length=1,
        max_length=limits.MAX_NOTE_LENGTH,
        description="Why; what you saw. Every action needs one.",
    ),
]


class DecisionCreate(Accepts):
    """An action that needs a note alone: release, cancel, dismiss, allow-attempt."""

    note: Note


class HoldReleaseCreate(DecisionCreate):
    """Release for retry; with ``retry``, the ledger then asks the workflow tool (n8n) to run
    the hold's failed or crashed execution again, once."""

    retry: StrictBool = Field(
        default=False,
        description="Also ask n8n to retry the hold's execution (only for one known to have "
        "failed or crashed); the scheduler makes the call after the release is recorded",
    )


class ConfirmHoldCreate(DecisionCreate):
    """Confirm with evidence: the receipt seen in the target system."""

    receipt: Receipt = Field(description="The target's reference for the write")


class ReapproveCreate(DecisionCreate):
    """Approve the operation again: for its processing version (``version``, when given,
    must name it), until ``expires_at`` or for good."""

    version: Id | None = None
    expires_at: When | None = None


class AssignCreate(DecisionCreate):
    owner: Id


class ExtendCreate(DecisionCreate):
    deadline: When = Field(description="The hold's new deadline, in the future")


class NoteCreate(DecisionCreate):
    next_action: (
        Annotated[Text, Field(min_length=1, max_length=limits.MAX_NEXT_ACTION_LENGTH)] | None
    ) = None


class HoldPublic(BaseModel):
    """A hold as the ledger keeps it (as ``GET /v1/operations/{id}`` lists it), with its
    operation's state (null for a hold about no operation)."""

    id: int
    cause_key: str
    reason: str
    blocking: bool
    operation_id: str | None
    execution_id: str | None
    source: str | None
    detail: str
    opened_at: Time
    deadline: Time
    owner: str | None
    next_action: str | None
    resolved_at: Time | None
    resolved_by: str | None
    resolution: str | None
    resolution_note: str | None
    version: int
    occurrences: int = Field(
        1,
        description="How many causes it counts: a duplicate_trigger hold every twin trigger of"
        " its workflow that day, any other hold 1",
    )
    operation_state: str | None


class HoldPage(BaseModel):
    items: list[HoldPublic]
    next_after: int | None = Field(description="Pass as `after` for the next page")
