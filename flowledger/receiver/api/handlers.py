"""FastAPI's exception handlers, each answering in the one error shape
(:mod:`flowledger.receiver.api.errors`), and the app's JSON answers, in ASCII."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowledger.receiver.api.deps import BodyRefused
from flowledger.receiver.api.errors import (
    INVALID_JSON,
    ApiError,
    as_api_error,
    error_body,
    validation_error,
)

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "body_too_large",
    415: "unsupported_media_type",
}


class AsciiJSONResponse(JSONResponse):
    """JSON with every character outside ASCII as JSON's ``\\u`` escape, as the workflow
    calls' answers are (:func:`flowledger.receiver.api.reply.dumps`): the same values for any
    JSON reader, and no control, bidi or invisible character that a stored value holds reaches
    a terminal or a log viewer raw through ``curl``. The app's default response class."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(
    status: int, code: str, message: str, field: str | None = None, **kw: Any
) -> JSONResponse:
    return AsciiJSONResponse(error_body(code, message, field), status_code=status, **kw)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the one shape."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.field, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        api = validation_error(exc.errors())
        if api.field == "operation_id" and api.code == "invalid_input":
            api.code = "invalid_id"  # in the path, as the workflow calls name it
        return error_response(api.status, api.code, api.message, api.field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc, BodyRefused):
            return error_response(exc.status_code, exc.error.code, exc.error.message)
        code = _STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        if exc.status_code == 400:
            code, message = "invalid_json", INVALID_JSON
        return error_response(exc.status_code, code, message, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        api = as_api_error(exc)
        return error_response(api.status, api.code, api.message, api.field, headers=api.headers)
