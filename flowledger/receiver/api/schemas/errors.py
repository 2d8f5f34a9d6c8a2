"""The one error shape, as the OpenAPI documents it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ErrorDetailPublic(BaseModel):
    code: str = Field(description="what went wrong, for a program: e.g. invalid_id")
    message: str = Field(description="what went wrong, for a person")
    field: str | None = Field(description="the field or header at fault, if one is")


class ErrorPublic(BaseModel):
    """Every answer other than 2xx and 307 (the one error shape)."""

    error: ErrorDetailPublic
