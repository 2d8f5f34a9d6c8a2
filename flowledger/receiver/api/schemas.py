"""What the API accepts and shows, as model families: ``*Base`` holds the fields a family
shares, ``*Create`` is what a client may send (unknown fields are errors), ``*Public`` is what
the ledger answers. The stored form is ``flowledger.storage.models``; none of these is a table.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from flowledger import domain
from flowledger.domain import FailOutcome, limits
from flowledger.domain.display import BIDI, CONTROLS
from flowledger.services.ledger import DispatchInput

MAX_INPUT_DEPTH = 64


def _escaped(chars: str) -> str:
    """A regex character class body (as :mod:`flowledger.domain.display` writes it) with every
    character as a ``\\uXXXX`` escape, which JSON Schema's and Python's regexes both read."""
    return "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in chars)


def _storable(value: str) -> str:
    problem = limits.storable_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _printable(value: str) -> str:
    problem = limits.printable_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _receipt(value: str) -> str:
    problem = limits.receipt_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range") from None


def _encodable(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None


def _json_depth(value: Any) -> Any:
    """Refuse inputs nested deeper than :data:`MAX_INPUT_DEPTH` (hashing recurses), or holding
    a lone surrogate (no UTF-8 for it to hash). Any other text is fine, NUL included: the input
    is hashed and discarded, never stored."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_INPUT_DEPTH:
            raise ValueError(f"is nested deeper than {MAX_INPUT_DEPTH} levels")
        if isinstance(item, dict):
            for k, v in item.items():
                _encodable(k)
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            _encodable(item)
    return value


# What the validators check, stated in the OpenAPI schema as patterns (the validators stay
# the ones that decide, with their clearer messages).
ID_PATTERN = f"^[^{_escaped(CONTROLS + BIDI)}]+$"
TEXT_PATTERN = "^[^\\u0000]*$"  # no NUL
_COERCED = "|".join(
    v.replace("[", "\\[").replace("]", "\\]") for v in sorted(limits.COERCED_RECEIPTS)
)
RECEIPT_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"  # not blank, no NUL
COERCED_PATTERN = f"^\\s*(?:{_COERCED})\\s*$"  # what a receipt must not be

Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_ID_LENGTH),
    AfterValidator(_printable),
    Field(json_schema_extra={"pattern": ID_PATTERN}),
]
Text = Annotated[str, AfterValidator(_storable), Field(json_schema_extra={"pattern": TEXT_PATTERN})]
Receipt = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_RECEIPT_LENGTH),
    AfterValidator(_receipt),
    Field(json_schema_extra={"pattern": RECEIPT_PATTERN, "not": {"pattern": COERCED_PATTERN}}),
]


def _time_text(value: Any) -> Any:
    """A time is sent as RFC 3339 text, as the schema says; pydantic would also take a number
    of seconds, which no client means."""
    if not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 date-time with an offset")
    return value


When = Annotated[AwareDatetime, BeforeValidator(_time_text), AfterValidator(_utc)]


def _not_bool(value: Any) -> Any:
    """JSON's ``true`` is not the integer 1 (pydantic would take it as 1); ``1250.0`` is."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number")
    return value


RunIndex = Annotated[int, Field(ge=0, le=limits.MAX_RUN_INDEX), BeforeValidator(_not_bool)]
InputHash = Annotated[str, StringConstraints(pattern=limits.HASH_PATTERN)]


class _Accepts(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- operations


# Exactly one of ``input`` (not null) and ``input_hash``. (The types are listed rather than
# written as "not null": schema-driven test generators handle a list far faster.)
_NOT_NULL = ["object", "array", "string", "number", "boolean"]
INPUT_XOR_HASH = {
    "oneOf": [
        {"required": ["input"], "properties": {"input": {"type": _NOT_NULL}}},
        {"required": ["input_hash"], "properties": {"input_hash": {"type": "string"}}},
    ]
}


class OperationBase(_Accepts):
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
        return _json_depth(value)

    @property
    def has_input(self) -> bool:
        """An ``input`` was given: ``"input": null`` counts as none."""
        return self.input is not None


class PrepareCreate(OperationBase):
    """Record the input and version without claiming the operation."""


class ApprovalCreate(_Accepts):
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


class ConfirmCreate(_Accepts):
    """Sent after a successful write, with the target's reference for it."""

    receipt: Receipt = Field(
        description="The target's reference for the write; empty, whitespace, and what "
        "JavaScript makes of a missing value (undefined, null, [object Object], NaN) are refused."
    )
    execution_id: Id | None = None
    detail: Annotated[Text, Field(max_length=limits.MAX_DETAIL_LENGTH)] | None = None


class FailCreate(_Accepts):
    """Sent when the write failed (``rejected``) or its outcome is unknown (``unknown``)."""

    outcome: FailOutcome
    error: Annotated[Text, Field(max_length=limits.MAX_ERROR_LENGTH)] = ""
    execution_id: Id | None = None


class AnswerPublic(BaseModel):
    """The ledger's answer to a workflow call. ``decision`` is set for dispatch only."""

    operation_id: str
    decision: domain.Decision | None
    state: domain.State
    attempt: int
    reason: str | None
    receipt: str | None


# --------------------------------------------------------------------------- n8n error hook


class _N8nPart(BaseModel):
    """n8n sends more than the ledger keeps; the rest (``error.context`` with request bodies
    and headers, the stack) is dropped on parsing and never stored or logged."""

    model_config = ConfigDict(extra="ignore")


# n8n sends ids as text, some versions and hand-made payloads as numbers: a whole number in
# this range is taken as its decimal text; any other number is refused like any non-text. A
# whole number is one with no fraction however it is written: JSON Schema's ``integer``
# includes ``12.0`` and ``1.2e1``, which JSON parsers read as floats.
N8N_NUMBER = {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}


def _id_text(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    whole = isinstance(value, int) and not isinstance(value, bool)
    return str(value) if whole and 0 <= value <= N8N_NUMBER["maximum"] else value


def _or_number(schema: dict[str, Any]) -> None:
    """The field's schema (text or null) with the whole number it also takes."""
    schema["anyOf"] = [*schema["anyOf"][:-1], N8N_NUMBER, schema["anyOf"][-1]]


N8N_ID = Field(default=None, json_schema_extra=_or_number)


class N8nErrorDetail(_N8nPart):
    name: Annotated[Text, Field(max_length=200)] | None = None
    message: Text | None = None
    http_code: Annotated[Text, Field(max_length=20)] | None = Field(
        default=None,
        alias="httpCode",
        json_schema_extra=_or_number,
    )

    @field_validator("http_code", mode="before")
    @classmethod
    def _code_text(cls, value: Any) -> Any:
        return _id_text(value)


class N8nExecution(_N8nPart):
    id: Id | None = N8N_ID
    url: Annotated[Text, Field(max_length=1000)] | None = None
    last_node_executed: Annotated[Text, Field(max_length=200)] | None = Field(
        default=None, alias="lastNodeExecuted"
    )
    error: N8nErrorDetail | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return _id_text(value)


class N8nWorkflow(_N8nPart):
    id: Id | None = N8N_ID
    name: Annotated[Text, Field(max_length=400)] | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return _id_text(value)


class N8nErrorCreate(_N8nPart):
    """What n8n's Error Trigger hands an error workflow. Without ``execution`` (an error in
    the trigger itself) there is no execution to look for."""

    execution: N8nExecution | None = None
    workflow: N8nWorkflow | None = None

    def detail(self) -> str:
        ex, wf = self.execution, self.workflow
        parts = [f"n8n execution {(ex.id if ex else None) or '?'} failed"]
        if wf is not None and (wf.name or wf.id):
            parts.append(f"in workflow {wf.name or ''} ({wf.id or '?'})".replace("  ", " "))
        if ex is not None and ex.last_node_executed:
            parts.append(f"at node {ex.last_node_executed}")
        err = ex.error if ex else None
        if err is not None:
            what = " ".join(p for p in (err.name, err.http_code) if p)
            message = (err.message or "")[:500]
            parts.append(f": {what}{': ' if what and message else ''}{message}")
        if ex is not None and ex.url:
            parts.append(f"({ex.url})")
        return " ".join(parts).replace(" :", ":")[: limits.MAX_HOLD_DETAIL_LENGTH]


class HookHoldPublic(BaseModel):
    operation_id: str
    hold_id: int | None = Field(description="None when that cause already had a hold")


class HookPublic(BaseModel):
    execution_id: str | None
    matched: int
    holds: list[HookHoldPublic]


# --------------------------------------------------------------------------- reads


class EventPublic(BaseModel):
    seq: int
    at: datetime
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
    approval_expires_at: datetime | None
    receipt: str | None
    deadline: datetime | None
    created_at: datetime
    updated_at: datetime


class OperationDetailPublic(BaseModel):
    operation: OperationPublic
    attempts: list[dict[str, Any]]
    receipts: list[dict[str, Any]]
    holds: list[dict[str, Any]]
    events: list[EventPublic]


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
    started_at: datetime | None
    stopped_at: datetime | None
    retry_of: str | None
    retry_success_id: str | None
    wait_till: datetime | None
    first_seen_at: datetime
    last_seen_at: datetime
    gone_at: datetime | None


class ExecutionPage(BaseModel):
    items: list[ExecutionPublic]
    next_after: int | None = Field(description="Pass as `after` for the next page")


class TokenPublic(BaseModel):
    """The token that called: what a client's connection test shows (never the token)."""

    name: str
    scope: str = Field(description="write, read or operator")
    signing: bool = Field(description="whether its requests must be signed")


# --------------------------------------------------------------------------- errors


class ErrorDetailPublic(BaseModel):
    code: str = Field(description="what went wrong, for a program: e.g. invalid_id")
    message: str = Field(description="what went wrong, for a person")
    field: str | None = Field(description="the field or header at fault, if one is")


class ErrorPublic(BaseModel):
    """Every answer other than 2xx and 307 (the one error shape)."""

    error: ErrorDetailPublic
