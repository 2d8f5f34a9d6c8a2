"""Bodies read strictly: UTF-8 without a byte order mark, each key once, a charset that says
UTF-8 or none, and integers sent as JSON numbers. Each refusal is a 400 naming the problem, on
the workflow calls and the hold routes alike, and writes nothing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import Api


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these refusals happen before any database work."""
    return str(tmp_path / "ledger.db")


JSON = "application/json"
DISPATCH = json.dumps(dispatch_body()).encode()
# (path, token, a valid body as text); the hold need not exist: the body is refused first.
ROUTES = {
    "dispatch": ("/v1/operations/op-1/dispatch", "write", DISPATCH.decode()),
    "hook": ("/v1/hooks/n8n/error", "write", '{"execution": {"id": "12"}}'),
    "hold": ("/v1/holds/1/note", "operator", '{"note": "seen"}'),
}


def _with_key_twice(text: str) -> bytes:
    """``text``'s first key sent twice, once with another value."""
    value = json.loads(text)
    key = next(iter(value))
    return b'{"%s": "other", ' % key.encode() + text[1:].encode()


REFUSED = {
    "duplicate-key": (lambda t: _with_key_twice(t), JSON, "duplicate_key"),
    "duplicate-key-nested": (
        lambda t: t[:-1].encode() + b', "nested": {"a": 1, "a": 2}}',
        JSON,
        "duplicate_key",
    ),
    "utf8-bom": (lambda t: b"\xef\xbb\xbf" + t.encode(), JSON, "byte_order_mark"),
    "utf16-bom": (lambda t: t.encode("utf-16"), JSON, "invalid_utf8"),
    "utf16le": (lambda t: t.encode("utf-16-le"), JSON, "invalid_utf8"),
    "utf32": (lambda t: t.encode("utf-32"), JSON, "invalid_utf8"),
    "latin-1": (lambda t: t.encode(), f"{JSON}; charset=latin-1", "unsupported_charset"),
    "iso-8859-1-quoted": (
        lambda t: t.encode(),
        f'{JSON}; charset="ISO-8859-1"',
        "unsupported_charset",
    ),
    "gzip": (lambda t: gzip.compress(t.encode()), "gzip", "unsupported_content_encoding"),
}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("case", list(REFUSED))
def test_a_body_read_two_ways_is_refused_with_400_naming_the_problem(
    api: Api, case: str, route: str
) -> None:
    path, token, text = ROUTES[route]
    make, content_type, code = REFUSED[case]
    headers = {"Content-Type": content_type}
    if content_type == "gzip":
        headers = {"Content-Type": JSON, "Content-Encoding": "gzip"}
    before = snapshot(api.ledger.store)
    answer = api.request("POST", path, token=token, content=make(text), headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == code
    assert snapshot(api.ledger.store) == before


@pytest.mark.parametrize(
    "content_type",
    [JSON, f"{JSON}; charset=utf-8", f"{JSON};charset=UTF-8", f'{JSON}; charset="utf-8"'],
)
def test_utf8_said_any_way_or_not_at_all_is_taken(api: Api, content_type: str) -> None:
    body = json.dumps(dispatch_body(input={"name": "café"}), ensure_ascii=False).encode()
    answer = api.request(
        "POST",
        "/v1/operations/op-1/dispatch",
        token="write",
        content=body,
        headers={"Content-Type": content_type},
    )
    assert (answer.status_code, answer.json()["decision"]) == (200, "go"), answer.text


@pytest.mark.parametrize(
    ("run_index", "status"),
    [(0, 200), (3.0, 200), ("0", 422), ("3", 422), (True, 422), (0.5, 422)],
)
def test_run_index_is_a_json_number_as_the_openapi_says(
    api: Api, run_index: Any, status: int
) -> None:
    answer = api.post("/v1/operations/op-1/dispatch", dispatch_body(run_index=run_index))
    assert answer.status_code == status, answer.text
    if status == 422:
        assert answer.json()["error"]["field"] == "run_index"
    schema = api.get("/openapi.json", token=None).json()["components"]["schemas"]
    documented = schema["DispatchCreate"]["properties"]["run_index"]["anyOf"][0]
    assert documented["type"] == "integer"
