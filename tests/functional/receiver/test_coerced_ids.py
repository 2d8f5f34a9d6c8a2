"""An operation id with an empty segment, or one that is a JavaScript coercion artefact
(``invoice:undefined:send``: a workflow built it from a missing field), is refused by every
call that creates or changes an operation — the API (422 ``invalid_id`` naming
``operation_id``) and the services alike — and nothing is written. An id already stored stays
readable, so that the person cleaning it up can see it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from flowledger.domain import FailOutcome
from flowledger.services import ledger as ledger_module
from flowledger.services.ledger import InvalidInput, Ledger
from tests.support.builders import dispatch_body, req
from tests.support.database import snapshot
from tests.support.receiver import Api

BAD = [
    "invoice:undefined:send",
    "invoice:null:send",
    "invoice:NaN:send",
    "invoice:[object Object]:send",
    "invoice::send",
    ":INV-42:send",
    "invoice:INV-42:",
    "undefined",
]
BODIES: dict[str, dict[str, Any]] = {
    "dispatch": dispatch_body(),
    "prepare": {"processing_version": "v1", "input": {"n": 1}},
    "confirm": {"receipt": "R-1", "execution_id": "exec-1"},
    "fail": {"outcome": "unknown", "error": "timeout", "execution_id": "exec-1"},
}


@pytest.mark.parametrize("call", sorted(BODIES))
@pytest.mark.parametrize("operation_id", BAD)
def test_a_write_call_refuses_the_id_naming_the_field_and_writes_nothing(
    api: Api, call: str, operation_id: str
) -> None:
    before = snapshot(api.ledger.store)
    path = f"/v1/operations/{quote(operation_id, safe=':')}/{call}"
    answer = api.post(path, BODIES[call])
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_id", "operation_id")
    assert "segment" in error["message"]
    assert snapshot(api.ledger.store) == before


def test_the_message_names_the_segment(api: Api) -> None:
    answer = api.post("/v1/operations/invoice:undefined:send/dispatch", dispatch_body())
    assert "'undefined'" in answer.json()["error"]["message"]


@pytest.mark.parametrize("operation_id", ["invoice:INV-42:send", "undefinedX:nullable:NaNa", "a"])
def test_an_id_whose_segments_only_contain_those_words_is_dispatched(
    api: Api, operation_id: str
) -> None:
    answer = api.post(f"/v1/operations/{operation_id}/dispatch", dispatch_body())
    assert (answer.status_code, answer.json()["decision"]) == (200, "go")


@pytest.mark.parametrize("operation_id", BAD[:1] + BAD[4:5])
def test_the_services_refuse_it_whoever_calls(api: Api, operation_id: str) -> None:
    ledger = api.ledger
    calls = [
        lambda: ledger.dispatch(operation_id, req("e1")),
        lambda: ledger.prepare(operation_id, processing_version="v1", input=1, has_input=True),
        lambda: ledger.confirm(operation_id, "R-1"),
        lambda: ledger.fail(operation_id, FailOutcome.UNKNOWN, "timeout"),
    ]
    for make in calls:
        with pytest.raises(InvalidInput) as refused:
            make().run("cli")
        assert refused.value.field == "operation_id"


def store_unchecked(ledger: Ledger, operation_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An operation stored before the rule, as an older ledger took it."""
    with monkeypatch.context() as patched:
        patched.setattr(ledger_module, "check_operation_id", lambda value: value)
        ledger.dispatch(operation_id, req("e1")).run("token:n8n")


def test_an_id_stored_before_the_rule_can_still_be_read(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_unchecked(api.ledger, "invoice:undefined:send", monkeypatch)
    answer = api.get("/v1/operations/invoice:undefined:send", token="read")
    assert answer.status_code == 200, answer.text
    assert answer.json()["operation"]["state"] == "dispatching"
    listed = api.get("/v1/operations", token="read").json()["items"]
    assert [row["operation_id"] for row in listed] == ["invoice:undefined:send"]
