"""``POST /v1/operations/{id}/release`` through the write lane: its answer, its refusals in the
API's one error shape, and ``dispatch_key``, which removes the released dispatch's stored
``go`` so that n8n's Retry On Fail, resending that dispatch with the same key, is answered
afresh instead of being let through for an operation that is ``prepared``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import Api, make_token

OP = "/v1/operations/invoice:INV-42:send"


def release(execution: str = "exec-1", **kw: Any) -> dict[str, Any]:
    return {"execution_id": execution, "run_index": 0, "reason": "another item was held", **kw}


def test_a_release_answers_the_operation_prepared(api: Api) -> None:
    assert api.post(f"{OP}/dispatch", dispatch_body()).json()["decision"] == "go"
    answer = api.post(f"{OP}/release", release())
    assert answer.status_code == 200
    assert answer.json() == {
        "operation_id": "invoice:INV-42:send",
        "decision": None,
        "state": "prepared",
        "attempt": 1,
        "reason": None,
        "receipt": None,
        "hold_id": None,
    }


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (release("exec-2"), 409, "not_dispatched_by_this_execution"),
        ({"run_index": 0}, 422, "missing_field"),
        (release(dispatch_key="two words"), 422, "invalid_input"),
        (release(dispatch_key="k" * 201), 422, "invalid_input"),
        (release(reason="x" * 2001), 422, "too_long"),
        (release(written=True), 422, "unknown_field"),
    ],
    ids=["another-execution", "no-execution", "key-with-space", "key-too-long", "long-reason",
         "unknown-field"],
)  # fmt: skip
def test_refusals_change_nothing(api: Api, body: dict[str, Any], status: int, code: str) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    before = snapshot(api.ledger.store)
    refused = api.post(f"{OP}/release", body)
    assert (refused.status_code, refused.json()["error"]["code"]) == (status, code)
    assert snapshot(api.ledger.store) == before


def test_an_unknown_operation_is_404(api: Api) -> None:
    assert api.post("/v1/operations/nope/release", release()).status_code == 404


def test_the_released_dispatch_sent_again_with_its_key_is_answered_afresh(api: Api) -> None:
    key = {"Idempotency-Key": "n8n-dispatch-1"}
    assert api.post(f"{OP}/dispatch", dispatch_body(), headers=key).json()["attempt"] == 1
    api.post(f"{OP}/release", release(dispatch_key="n8n-dispatch-1"))

    again = api.post(f"{OP}/dispatch", dispatch_body(), headers=key)

    assert "idempotent-replayed" not in again.headers
    assert (again.json()["decision"], again.json()["attempt"]) == ("go", 2)
    state = api.get(OP).json()["operation"]["state"]
    assert state == "dispatching"  # a go the ledger recorded, not a stale one


def test_without_the_key_the_stored_go_would_be_replayed(api: Api) -> None:
    """Why the node sends ``dispatch_key``: the stored answer outlives the release."""
    key = {"Idempotency-Key": "n8n-dispatch-1"}
    api.post(f"{OP}/dispatch", dispatch_body(), headers=key)
    api.post(f"{OP}/release", release())
    again = api.post(f"{OP}/dispatch", dispatch_body(), headers=key)
    assert again.headers["idempotent-replayed"] == "true"


def test_only_the_calling_token_s_stored_answers_are_removed(api: Api) -> None:
    other = make_token(api.ledger, "other-workflows", "write")
    key = {"Idempotency-Key": "shared-name"}
    api.post(f"{OP}/dispatch", dispatch_body(), headers=key)
    api.post(f"{OP}/release", release(dispatch_key="shared-name"), token=other)
    again = api.post(f"{OP}/dispatch", dispatch_body(), headers=key)
    assert again.headers["idempotent-replayed"] == "true"


def test_refusals_say_what_is_wrong_with_the_value(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    long = api.post(f"{OP}/release", release(reason="x" * 2001)).json()["error"]
    key = api.post(f"{OP}/release", release(dispatch_key="two words")).json()["error"]
    assert long == {"code": "too_long", "message": "at most 2000 characters, not 2001",
                    "field": "reason"}  # fmt: skip
    assert key == {
        "code": "invalid_input",
        "message": "an Idempotency-Key is 1 to 200 visible ASCII characters",
        "field": "dispatch_key",
    }
