"""Hostile and broken requests: each gets a clear error in the one shape, never a 5xx, and the
database does not change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio.from_thread
import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import BODY_LIMIT, Api, api_config, auth, make_token

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
    [b"{", b'{"processing_version": "v1",', b"not json", b"[" * 5000 + b"]" * 5000],
)
def test_malformed_json_is_400(api: Api, raw: bytes) -> None:
    _check(api, 400, "invalid_json", content=raw[:BODY_LIMIT], headers=JSON)


def test_bytes_that_are_not_utf8_are_400_invalid_utf8(api: Api) -> None:
    _check(api, 400, "invalid_utf8", content=b"\xff\xfe", headers=JSON)


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


@pytest.mark.parametrize(
    "operation_id",
    ["a%ffb", "a%feb", "a%C3b", "a%0Ab", "a%0Db", "a%1B%5B2Jb", "a%C2%9Bb", "a%E2%80%AEb"],
    ids=["ff", "fe", "truncated", "newline", "return", "escape", "c1", "bidi-override"],
)
def test_an_operation_id_that_is_not_printable_utf8_is_422_invalid_id(
    api: Api, operation_id: str
) -> None:
    path = f"/v1/operations/{operation_id}/dispatch"
    assert _check(api, 422, "invalid_id", path=path, json=dispatch_body())["field"] == (
        "operation_id"
    )


def test_an_operation_id_holding_the_replacement_character_is_its_own_operation(
    api: Api,
) -> None:
    answer = api.post("/v1/operations/a%EF%BF%BDb/dispatch", dispatch_body())
    assert answer.status_code == 200, answer.text
    assert answer.json()["operation_id"] == "a\ufffdb"
    _check(api, 422, "invalid_id", path="/v1/operations/a%ffb/dispatch", json=dispatch_body())


@pytest.mark.parametrize(
    "operation_id",
    ["a%ffb", "a%feb", "a%0Ab", "a%0A", "x/y%0A", "a%0Db", "a%1B%5B2Jb", "a%E2%80%AEb"],
    ids=["ff", "fe", "newline", "final-newline", "final-newline-after-slash", "return", "escape",
         "bidi-override"],
)  # fmt: skip
def test_reading_an_operation_by_an_id_that_is_not_printable_utf8_is_422_invalid_id(
    api: Api, operation_id: str
) -> None:
    # What the id would be read as exists: a replaced or dropped character finds it.
    for kept in ("a\ufffdb", "a", "x/y", "ab"):
        assert (
            api.post(f"/v1/operations/{quote(kept)}/dispatch", dispatch_body()).status_code == 200
        )
    answer = api.request("GET", f"/v1/operations/{operation_id}", token="operator")
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_id"
    assert answer.json()["error"]["field"] == "operation_id"


@pytest.mark.parametrize("call", ["dispatch", "confirm"])
def test_a_write_call_with_a_line_break_after_it_is_refused_not_served(api: Api, call: str) -> None:
    body = dispatch_body() if call == "dispatch" else {"receipt": "R-1"}
    _check(api, 422, "invalid_id", path=f"/v1/operations/op-1/{call}%0A", json=body)


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


def test_a_body_without_a_content_type_is_415(api: Api) -> None:
    raw = json.dumps(dispatch_body()).encode()
    _check(api, 415, "unsupported_media_type", content=raw)


@pytest.mark.parametrize("raw", [b"null", b"[]", b'"text"', b"12"])
def test_a_body_that_is_not_an_object_says_so_without_naming_a_class(api: Api, raw: bytes) -> None:
    error = _check(api, 422, "invalid_input", content=raw, headers=JSON)
    assert error == {"code": "invalid_input", "message": "must be a JSON object", "field": "body"}


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_on_a_write_path_are_405_naming_post(api: Api, method: str) -> None:
    before = snapshot(api.ledger.store)
    answer = api.request(method, DISPATCH, token="write", json=dispatch_body())
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
    assert answer.json() == {
        "error": {"code": "method_not_allowed", "message": "send POST", "field": None}
    }
    assert snapshot(api.ledger.store) == before


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_the_hook_path_takes_only_post(api: Api, method: str) -> None:
    before = snapshot(api.ledger.store)
    answer = api.request(method, "/v1/hooks/n8n/error", token="write", json={"execution": {}})
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
    assert answer.json() == {
        "error": {"code": "method_not_allowed", "message": "send POST", "field": None}
    }
    assert snapshot(api.ledger.store) == before


def test_a_trailing_slash_is_redirected_with_307_keeping_the_method(api: Api) -> None:
    answer = api.post(f"{DISPATCH}/?x=1", dispatch_body())
    assert (answer.status_code, answer.headers["location"]) == (307, f"{DISPATCH}?x=1")


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("call", ["dispatch", "prepare", "confirm", "fail"])
def test_a_write_route_takes_only_post_get_included(api: Api, method: str, call: str) -> None:
    before = snapshot(api.ledger.store)
    # GET on ".../x/dispatch" is the dispatch call, not a read of an operation "x/dispatch"
    answer = api.request(method, f"/v1/operations/x/{call}", token="operator")
    assert (answer.status_code, answer.headers["allow"]) == (405, "POST")
    if method != "HEAD":
        assert answer.json()["error"]["code"] == "method_not_allowed"
    assert snapshot(api.ledger.store) == before


def test_the_write_calls_work_when_the_receiver_is_mounted_under_a_prefix(
    ledger: Ledger,
) -> None:
    receiver = create_app(ledger, config=api_config(), token_ttl=0.0)
    outer = Starlette(routes=[Mount("/ledger", app=receiver)])
    token = make_token(ledger, "w")
    lifespan = receiver.router.lifespan_context(receiver)
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(lifespan),
    ):
        transport = httpx.ASGITransport(app=outer)

        async def post() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
                return await c.post(f"/ledger{DISPATCH}", json=dispatch_body(), headers=auth(token))

        answer = portal.call(post)
    assert answer.status_code == 200 and answer.json()["decision"] == "go"


HASH = "sha256:" + "0" * 64


def test_an_explicit_null_input_counts_as_no_input(api: Api) -> None:
    body = dispatch_body(input=None, input_hash=HASH)
    answer = api.post(DISPATCH, body)
    assert (answer.status_code, answer.json()["decision"]) == (200, "go")
    with_neither = dispatch_body(input=None)
    assert _check(api, 422, "invalid_input", json=with_neither)["field"] == "input"


def test_input_and_input_hash_together_are_refused(api: Api) -> None:
    body = dispatch_body(input_hash=HASH)
    assert _check(api, 422, "invalid_input", json=body)["field"] == "input_hash"


def test_an_input_may_hold_nul_characters_it_is_only_hashed(api: Api) -> None:
    answer = api.post(DISPATCH, dispatch_body(input={"a\x00": "b\x00"}))
    assert answer.status_code == 200


@pytest.mark.parametrize("when", [0, 1_700_000_000, True])
def test_a_time_given_as_a_number_is_refused(api: Api, when: Any) -> None:
    body = dispatch_body(deadline=when)
    assert _check(api, 422, "invalid_input", json=body)["field"] == "deadline"


@pytest.mark.parametrize(
    ("workflow_id", "status"),
    [
        (7, 200),
        ("7", 200),
        (7.0, 200),  # a JSON Schema integer too
        (2**53 - 1.0, 200),
        (7.5, 422),
        (-1, 422),
        (2**53, 422),
        (float(2**53), 422),
        (True, 422),
    ],
)
def test_the_hook_takes_a_workflow_id_as_text_or_a_whole_number_as_documented(
    api: Api, workflow_id: Any, status: int
) -> None:
    body = {"execution": {"id": 12.0}, "workflow": {"id": workflow_id, "name": "wf"}}
    answer = api.post("/v1/hooks/n8n/error", body)
    assert answer.status_code == status, answer.text
    if status == 200:
        assert answer.json()["execution_id"] == "12"
    spec = api.get("/openapi.json", token=None).json()["components"]["schemas"]
    documented = spec["N8nWorkflow"]["properties"]["id"]["anyOf"]
    assert {"type": "integer", "minimum": 0, "maximum": 2**53 - 1} in documented
