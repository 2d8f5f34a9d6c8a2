"""What the read routes show: operations with their events, executions, and the calling
token."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from flowledger.receiver.api.schemas.fields import RowValue, Time


class EventPublic(BaseModel):
    seq: int
    at: Time
    actor: str
    kind: str
    hold_id: int | None
    data: dict[str, Any]


class OperationPublic(BaseModel):
    operation_id: str
    state: str
    input_hash: str
    processing_version: str
    attempt: int
    max_attempts: int
    execution_id: str | None
    run_index: int | None
    workflow_id: str | None
    step: str | None
    source: str | None
    input_ref: str | None
    approval_version: str | None
    approval_expires_at: Time | None
    receipt: str | None
    deadline: Time | None
    created_at: Time
    updated_at: Time


class OperationPage(BaseModel):
    items: list[OperationPublic]
    next_after: str | None = Field(description="Pass as `after` for the next page")


class ExecutionPublic(BaseModel):
    id: int
    source: str
    external_id: str
    workflow_id: str | None
    workflow_name: str | None
    status: str
    mode: str | None
    final: bool
    started_at: Time | None
    stopped_at: Time | None
    retry_of: str | None
    retry_success_id: str | None
    wait_till: Time | None
    first_seen_at: Time
    last_seen_at: Time
    gone_at: Time | None


class LinkedExecutionPublic(ExecutionPublic):
    """A kept execution linked to an operation, and how."""

    linked_via: Literal["attempt", "retry_of", "custom_data"] = Field(
        description="attempt: its id is on one of the operation's attempts; retry_of: it "
        "retried (up the retryOf chain) such an execution; custom_data: it declared the "
        "operation itself. The most direct of its links when there are several"
    )


class OperationDetailPublic(BaseModel):
    operation: OperationPublic
    attempts: list[dict[str, RowValue]]
    receipts: list[dict[str, RowValue]]
    holds: list[dict[str, RowValue]]
    events: list[EventPublic]
    executions: list[LinkedExecutionPublic] = Field(
        description="The kept executions linked to the operation, each once"
    )
    retries: list[dict[str, RowValue]] = Field(
        default_factory=list,
        description="The retries asked in the workflow tool when its holds were released "
        "(`hold ID release --retry`): the execution retried, who asked, the new execution "
        "(new_execution_id) once made, or the tool's refusal (outcome refused, last_error)",
    )


class ExecutionPage(BaseModel):
    items: list[ExecutionPublic]
    next_after: int | None = Field(description="Pass as `after` for the next page")


class TokenPublic(BaseModel):
    """The token that called: what a client's connection test shows (never the token)."""

    name: str
    scope: str = Field(description="write, read or operator")
    signing: bool = Field(description="whether its requests must be signed")
