"""The workflow calls' models: what prepare, dispatch, confirm and fail accept, and the
answer each of them gets."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flowledger import domain
from flowledger.domain import FailOutcome, limits
from flowledger.receiver.api.schemas.fields import (
    MAX_INPUT_DEPTH,
    Accepts,
    Id,
    IdempotencyKey,
    InputHash,
    Receipt,
    RunIndex,
    Text,
    When,
    json_depth,
)
from flowledger.services.ledger import DispatchInput

# Exactly one of ``input`` (not null) and ``input_hash``. (The types are listed rather than
# written as "not null": schema-driven test generators handle a list far faster.)
_NOT_NULL = ["object", "array", "string", "number", "boolean"]
INPUT_XOR_HASH = {
    "oneOf": [
        {"required": ["input"], "properties": {"input": {"type": _NOT_NULL}}},
        {"required": ["input_hash"], "properties": {"input_hash": {"type": "string"}}},
    ]
}


class OperationBase(Accepts):
    """What prepare and dispatch share: the logic's version and where the call comes from.
    Exactly one of ``input`` and ``input_hash`` is given (``"input": null`` is no input)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=INPUT_XOR_HASH)  # type: ignore[typeddict-item]

    processing_version: Id
    workflow_id: Id | None = None
    step: Id | None = None
    source: Id | None = None
    input_ref: (
        Annotated[Text, Field(min_length=1, max_length=limits.MAX_INPUT_REF_LENGTH)] | None
    ) = None
    input: Any = Field(
        default=None,
        description="The operation's input, any JSON nested at most "
        f"{MAX_INPUT_DEPTH} levels; hashed, then discarded (never stored or logged).",
    )
    input_hash: InputHash | None = Field(
        default=None, description="Or the hash the client computed: sha256:<64 hex>."
    )

    @field_validator("input")
    @classmethod
    def _input_depth(cls, value: Any) -> Any:
        return json_depth(value)

    @property
    def has_input(self) -> bool:
        """An ``input`` was given: ``"input": null`` counts as none."""
        return self.input is not None


class PrepareCreate(OperationBase):
    """Record the input and version without claiming the operation."""


class ApprovalCreate(Accepts):
    version: Id
    expires_at: When | None = None


class DispatchCreate(OperationBase):
    """Sent before the write: may this execution write now?"""

    execution_id: Id
    run_index: RunIndex | None = None
    deadline: When | None = None
    approval: ApprovalCreate | None = None

    def to_input(self) -> DispatchInput:
        approval = (
            domain.Approval(self.approval.version, self.approval.expires_at)
            if self.approval is not None
            else None
        )
        return DispatchInput(
            processing_version=self.processing_version,
            execution_id=self.execution_id,
            input=self.input,
            input_hash=self.input_hash,
            has_input=self.has_input,
            workflow_id=self.workflow_id,
            step=self.step,
            run_index=self.run_index,
            source=self.source,
            deadline=self.deadline,
            approval=approval,
            input_ref=self.input_ref,
        )


class ConfirmCreate(Accepts):
    """Sent after a successful write, with the target's reference for it."""

    receipt: Receipt = Field(
        description="The target's reference for the write; empty, whitespace, and what "
        "JavaScript makes of a missing value (undefined, null, [object Object], NaN) are refused."
    )
    execution_id: Id | None = None
    detail: Annotated[Text, Field(max_length=limits.MAX_DETAIL_LENGTH)] | None = None


class FailCreate(Accepts):
    """Sent when the write failed (``rejected``) or its outcome is unknown (``unknown``)."""

    outcome: FailOutcome
    error: Annotated[Text, Field(max_length=limits.MAX_ERROR_LENGTH)] = ""
    execution_id: Id | None = None


class ReleaseCreate(Accepts):
    """Sent by the execution that dispatched the operation when it did not write it."""

    execution_id: Id
    run_index: RunIndex | None = None
    reason: Annotated[Text, Field(max_length=limits.MAX_ERROR_LENGTH)] | None = None
    dispatch_key: IdempotencyKey | None = Field(
        default=None, description="The Idempotency-Key the released dispatch was sent with."
    )


class AnswerPublic(BaseModel):
    """The ledger's answer to a workflow call. ``decision`` is set for dispatch only."""

    operation_id: str
    decision: domain.Decision | None
    state: domain.State
    attempt: int
    reason: str | None
    receipt: str | None
    hold_id: int | None = Field(
        description="A dispatch answered `hold`: the id of the open hold it waits on (the hold "
        "API's `{id}`), so that a workflow's error or message can name it; else null.",
    )
