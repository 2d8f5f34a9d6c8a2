"""Hostile and broken requests: each gets a clear error in the one shape, never a 5xx, and the
database does not change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.functional.receiver.conftest import BODY_LIMIT, Api
from tests.receiver_support import dispatch_body, snapshot

DISPATCH = "/v1/operations/op-1/dispatch"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these refusals happen before any database work (the decisions, idempotency
    and read tests run on both backends)."""
    return str(tmp_path / "ledger.db")


JSON = {"Content-Type": "application/json"}


def _check(api: Api, status: int, code: str, **kw: Any) -> dict[str, Any]:
    before = snapshot(api.ledger.store)
    path = kw.pop("path", DISPATCH)
    answer = api.post(path, **kw)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert set(error) == {"code", "message", "field"}
    assert snapshot(api.ledger.store) == before
    return dict(error)


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"processing_version": "v1",', b"not json", b"\xff\xfe", b"[" * 5000 + b"]" * 5000],
)
def test_malformed_json_is_400(api: Api, raw: bytes) -> None:
    _check(api, 400, "invalid_json", content=raw[:BODY_LIMIT], headers=JSON)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"execution_id": 12}, "execution_id"),
        ({"run_index": "zero"}, "run_index"),
        ({"run_index": -1}, "run_index"),
        ({"run_index": 2**40}, "run_index"),
        ({"processing_version": None}, "processing_version"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"deadline": "2026-11-02T09:00:00"}, "deadline"),  # naive: no offset
        ({"deadline": "0001-01-01T00:00:00+23:59"}, "deadline"),  # out of range in UTC
        ({"approval": {"version": "v1", "extra": 1}}, "approval.extra"),
        ({"input_hash": "md5:abc", "input": None}, "input_hash"),
        ({"execution_id": "a\x00b"}, "execution_id"),
        ({"step": "line\nbreak"}, "step"),
        ({"input_ref": "\ud800"}, "input_ref"),
    ],
)
def test_wrong_types_and_values_are_422_naming_the_field(
    api: Api, change: dict[str, Any], field: str
) -> None:
    body = dispatch_body(**change)
    if "input_hash" in change:
        body.pop("input")
    raw = json.dumps(body).encode()
    error = _check(api, 422, error_code(change), content=raw, headers=JSON)
    assert error["field"] == field


def error_code(change: dict[str, Any]) -> str:
    return "unknown_field" if "approval" in change else "invalid_input"


def test_missing_fields_are_422(api: Api) -> None:
    error = _check(api, 422, "missing_field", json={"processing_version": "v1"})
    assert error["field"] == "execution_id"


def test_missing_input_is_422(api: Api) -> None:
    body = dispatch_body()
    body.pop("input")
    assert _check(api, 422, "invalid_input", json=body)["field"] == "input"


def test_unknown_fields_are_refused(api: Api) -> None:
    error = _check(api, 422, "unknown_field", json=dispatch_body(surprise=True))
    assert error["field"] == "surprise"


def test_a_body_that_is_not_an_object_is_422(api: Api) -> None:
    _check(api, 422, "invalid_input", json=[1, 2, 3])


def test_input_nested_too_deeply_is_refused(api: Api) -> None:
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    assert _check(api, 422, "invalid_input", json=dispatch_body(input=deep))["field"] == "input"


@pytest.mark.parametrize("field", ["execution_id", "processing_version", "workflow_id"])
def test_ids_over_200_characters_are_refused(api: Api, field: str) -> None:
    error = _check(api, 422, "too_long", json=dispatch_body(**{field: "x" * 201}))
    assert error["field"] == field


def test_an_operation_id_over_200_characters_is_refused(api: Api) -> None:
    path = f"/v1/operations/{'x' * 201}/dispatch"
    _check(api, 422, "too_long", path=path, json=dispatch_body())


def test_a_body_over_the_limit_is_413(api: Api) -> None:
    body = dispatch_body(input={"blob": "x" * BODY_LIMIT})
    _check(api, 413, "body_too_large", json=body)


def test_a_streamed_body_over_the_limit_is_413_without_content_length(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"processing_version": "v1", "input": "'
        for _ in range(BODY_LIMIT // 512 + 2):
            yield b"x" * 512
        yield b'"}'

    async def stream() -> Any:
        for chunk in chunks():
            yield chunk

    _check(api, 413, "body_too_large", content=stream(), headers=JSON)


def test_a_lying_content_length_is_413(api: Api) -> None:
    headers = {**JSON, "Content-Length": str(BODY_LIMIT * 10)}
    _check(api, 413, "body_too_large", content=b"{}", headers=headers)


def test_a_bad_idempotency_key_is_422(api: Api) -> None:
    headers = {"Idempotency-Key": "has space"}
    error = _check(api, 422, "invalid_input", json=dispatch_body(), headers=headers)
    assert error["field"] == "Idempotency-Key"


@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", "text/json"])
def test_a_body_sent_as_another_media_type_is_415(api: Api, media: str) -> None:
    raw = json.dumps(dispatch_body()).encode()
    _check(api, 415, "unsupported_media_type", content=raw, headers={"Content-Type": media})


def test_json_with_a_charset_or_a_json_suffix_is_accepted(api: Api) -> None:
    raw = json.dumps(dispatch_body()).encode()
    for n, media in enumerate(["application/json; charset=utf-8", "application/vnd.x+json"]):
        path = f"/v1/operations/op-{n}/dispatch"
        answer = api.post(path, content=raw, headers={"Content-Type": media})
        assert answer.status_code == 200, answer.text


def test_an_empty_body_is_422_naming_the_body(api: Api) -> None:
    assert _check(api, 422, "missing_field", content=b"", headers=JSON)["field"] == "body"


def test_a_bad_token_is_refused_before_the_body_is_read(api: Api) -> None:
    _check(api, 401, "unknown_token", content=b"{", headers=JSON, token="nobody")
