"""The hold routes: the open holds for any reading token, a person's actions for operator
tokens only, the domain's refusals in the one error shape."""

from __future__ import annotations

import pytest

from tests.support.builders import dispatch_body
from tests.support.receiver import Api

OP = "/v1/operations/invoice:INV-42:send"


def _unknown_outcome(api: Api) -> int:
    api.post(f"{OP}/dispatch", dispatch_body())
    api.post(f"{OP}/fail", {"outcome": "unknown", "error": "timeout"})
    (hold,) = api.get("/v1/holds").json()["items"]
    return int(hold["id"])


def test_the_open_holds_are_listed_as_the_operation_lists_them(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    listed = api.get("/v1/holds", params={"reason": "unknown_outcome"}).json()
    (hold,) = listed["items"]
    assert listed["next_after"] is None
    (as_shown,) = api.get(OP).json()["holds"]
    assert {k: v for k, v in hold.items() if k != "operation_state"} == as_shown
    assert hold["operation_state"] == "dispatching"
    assert api.get(f"/v1/holds/{hold_id}").json() == hold
    assert api.get("/v1/holds", params={"reason": "max_attempts"}).json()["items"] == []
    assert api.get("/v1/holds", params={"reason": "bogus"}).status_code == 422


def test_an_operator_token_confirms_and_the_answer_is_the_hold_afterwards(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    done = api.post(
        f"/v1/holds/{hold_id}/confirm",
        {"receipt": "bank-77", "note": "seen in the bank's log"},
        token="operator",
    )
    assert done.status_code == 200, done.text
    assert done.json()["resolution"] == "confirmed_with_evidence"
    assert done.json()["resolved_by"] == "operator:operator"  # the token's name
    assert done.json()["operation_state"] == "confirmed"
    assert api.get(OP).json()["operation"]["receipt"] == "bank-77"


@pytest.mark.parametrize("scope", ["write", "read"])
def test_only_an_operator_token_may_act(api: Api, scope: str) -> None:
    hold_id = _unknown_outcome(api)
    refused = api.post(f"/v1/holds/{hold_id}/note", {"note": "n"}, token=scope)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_a_refusal_is_the_domains_words_and_changes_nothing(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    events = len(api.get(OP).json()["events"])
    refused = api.post(f"/v1/holds/{hold_id}/dismiss", {"note": "n"}, token="operator")
    assert refused.status_code == 409
    assert refused.json()["error"] == {
        "code": "blocking_hold",
        "message": "a blocking hold is resolved by confirm, release for retry or cancel, "
        "not dismissed",
        "field": None,
    }
    assert len(api.get(OP).json()["events"]) == events
    api.post(f"/v1/holds/{hold_id}/release", {"note": "not there"}, token="operator")
    again = api.post(f"/v1/holds/{hold_id}/release", {"note": "again"}, token="operator")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_resolved"


@pytest.mark.parametrize(
    ("path", "body", "status", "code", "field"),
    [
        ("/v1/holds/9999/note", {"note": "n"}, 404, "not_found", None),
        ("/v1/holds/{id}/confirm", {"note": "n"}, 422, "missing_field", "receipt"),
        ("/v1/holds/{id}/release", {}, 422, "missing_field", "note"),
        ("/v1/holds/{id}/release", {"note": ""}, 422, "invalid_input", "note"),
        ("/v1/holds/{id}/note", {"note": "n", "owner": "x"}, 422, "unknown_field", "owner"),
        (
            "/v1/holds/{id}/extend",
            {"note": "n", "deadline": "2020-01-01T00:00:00Z"},
            409,
            "deadline_passed",
            "deadline",
        ),
    ],
)
def test_bad_input_to_an_action_is_one_clear_error(
    api: Api, path: str, body: dict[str, str], status: int, code: str, field: str | None
) -> None:
    hold_id = _unknown_outcome(api)
    answer = api.post(path.format(id=hold_id), body, token="operator")
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["field"]) == (code, field)


def _notes(api: Api) -> list[str]:
    return [e["kind"] for e in api.get(OP).json()["events"] if e["kind"].startswith("hold_")]


def test_an_action_sent_again_with_its_idempotency_key_is_done_once(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    before = _notes(api)
    key = {"Idempotency-Key": "chat-4711"}
    path = f"/v1/holds/{hold_id}/assign"
    first = api.post(path, {"owner": "carol", "note": "hers"}, token="operator", headers=key)
    again = api.post(path, {"owner": "carol", "note": "hers"}, token="operator", headers=key)
    assert first.status_code == again.status_code == 200, again.text
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert len(_notes(api)) == len(before) + 1  # one assignment recorded, not two
    other = api.post(path, {"owner": "dave", "note": "his"}, token="operator", headers=key)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert api.get(f"/v1/holds/{hold_id}").json()["owner"] == "carol"
    plain = [api.post(path, {"owner": "carol", "note": "n"}, token="operator") for _ in "ab"]
    assert [r.status_code for r in plain] == [200, 200]
    assert len(_notes(api)) == len(before) + 3  # without a key, each is recorded


def test_a_decision_sent_again_with_its_key_answers_the_resolved_hold(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    key = {"Idempotency-Key": "retry-after-timeout"}
    body = {"receipt": "bank-77", "note": "seen in the bank's log"}
    path = f"/v1/holds/{hold_id}/confirm"
    first = api.post(path, body, token="operator", headers=key)
    again = api.post(path, body, token="operator", headers=key)
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert again.json()["resolution"] == "confirmed_with_evidence"
    unkeyed = api.post(path, body, token="operator")
    assert unkeyed.status_code == 409
    assert unkeyed.json()["error"]["code"] == "already_resolved"


def test_a_refused_action_keeps_its_key_unused(api: Api) -> None:
    hold_id = _unknown_outcome(api)
    key = {"Idempotency-Key": "k-dismiss"}
    path = f"/v1/holds/{hold_id}/dismiss"
    for _ in "ab":  # refused each time, nothing stored under the key
        refused = api.post(path, {"note": "n"}, token="operator", headers=key)
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "blocking_hold"
    bad = api.post(path, {"note": "n"}, token="operator", headers={"Idempotency-Key": "a b"})
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "Idempotency-Key"
