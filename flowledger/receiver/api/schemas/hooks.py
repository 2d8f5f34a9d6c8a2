"""The n8n error hook's models: what n8n's Error Trigger sends (the part the ledger keeps)
and what the hook answers."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flowledger.domain import limits
from flowledger.receiver.api.schemas.fields import Id, Text


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
