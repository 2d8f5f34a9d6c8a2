"""Every workflow call and every decision, over HTTP."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from flowledger.domain.hashing import input_hash
from flowledger.storage.models import Hold, table
from tests.support.builders import FakeClock, dispatch_body
from tests.support.receiver import Api

OP = "/v1/operations/invoice:INV-42:send"


def test_first_dispatch_is_go_and_a_replay_of_it_is_go_again(api: Api) -> None:
    first = api.post(f"{OP}/dispatch", dispatch_body())
    assert first.status_code == 200
    assert first.json() == {
        "operation_id": "invoice:INV-42:send",
        "decision": "go",
        "state": "dispatching",
        "attempt": 1,
        "reason": None,
        "receipt": None,
        "hold_id": None,
    }
    again = api.post(f"{OP}/dispatch", dispatch_body())
    assert again.json()["decision"] == "go"
    assert again.json()["attempt"] == 1


def test_dispatch_from_another_execution_while_dispatching_is_held(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body("exec-1"))
    other = api.post(f"{OP}/dispatch", dispatch_body("exec-2"))
    assert other.status_code == 200
    assert other.json()["decision"] == "hold"
    assert other.json()["reason"] == "in_flight"


def test_confirmed_operation_is_skipped_with_its_receipt(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    done = api.post(f"{OP}/confirm", {"receipt": "R-1", "execution_id": "exec-1"})
    assert done.status_code == 200
    assert done.json()["state"] == "confirmed" and done.json()["receipt"] == "R-1"
    skip = api.post(f"{OP}/dispatch", dispatch_body("exec-9"))
    assert skip.json()["decision"] == "skip"
    assert skip.json()["receipt"] == "R-1"


def test_the_input_may_be_sent_as_its_hash(api: Api) -> None:
    body = dispatch_body()
    digest = input_hash(body.pop("input"))
    assert api.post(f"{OP}/dispatch", {**body, "input_hash": digest}).json()["decision"] == "go"
    assert api.post(f"{OP}/dispatch", dispatch_body()).json()["decision"] == "go"  # same hash


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"input": {"invoice": "INV-42", "amount": 9999}}, "input_mismatch"),
        ({"processing_version": "v2"}, "version_mismatch"),
    ],
)
def test_dispatch_with_another_input_or_version_is_held(
    api: Api, change: dict[str, object], reason: str
) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    api.post(f"{OP}/confirm", {"receipt": "R-1"})
    held = api.post(f"{OP}/dispatch", dispatch_body("exec-2", **change))
    assert held.json()["decision"] == "hold"
    assert held.json()["reason"] == reason
    (hold,) = [h for h in api.get(f"{OP}").json()["holds"] if h["reason"] == reason]
    assert held.json()["hold_id"] == hold["id"]  # the hold this call opened
    again = api.post(f"{OP}/dispatch", dispatch_body("exec-3", **change))
    assert again.json()["hold_id"] == hold["id"]  # the one already open


def test_a_dispatch_answered_hold_without_a_hold_names_none(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body("exec-1"))
    other = api.post(f"{OP}/dispatch", dispatch_body("exec-2"))
    assert other.json()["reason"] == "in_flight" and other.json()["hold_id"] is None


def test_expired_approval_is_held(api: Api, clock: FakeClock) -> None:
    expired = (clock.now - timedelta(minutes=1)).isoformat()
    held = api.post(
        f"{OP}/dispatch", dispatch_body(approval={"version": "v1", "expires_at": expired})
    )
    assert held.json()["decision"] == "hold"
    assert held.json()["reason"] == "approval_expired"
    assert held.json()["state"] == "prepared"


def test_rejected_write_may_be_dispatched_again_as_attempt_two(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    failed = api.post(f"{OP}/fail", {"outcome": "rejected", "error": "422 from target"})
    assert failed.json()["state"] == "failed"
    again = api.post(f"{OP}/dispatch", dispatch_body("exec-2"))
    assert again.json()["decision"] == "go"
    assert again.json()["attempt"] == 2


def test_unknown_outcome_blocks_every_later_dispatch(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    unknown = api.post(f"{OP}/fail", {"outcome": "unknown", "error": "timeout"})
    assert unknown.json()["reason"] == "unknown_outcome"
    held = api.post(f"{OP}/dispatch", dispatch_body("exec-2"))
    assert held.json()["decision"] == "hold"
    assert held.json()["reason"] == "unknown_outcome"


def test_second_confirm_with_another_receipt_opens_a_conflict(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body())
    api.post(f"{OP}/confirm", {"receipt": "R-1"})
    same = api.post(f"{OP}/confirm", {"receipt": "R-1"})
    assert same.json()["reason"] is None
    other = api.post(f"{OP}/confirm", {"receipt": "R-2"})
    assert other.status_code == 200
    assert other.json()["reason"] == "receipt_conflict"
    assert other.json()["receipt"] == "R-1"


def test_prepare_records_without_claiming_and_refuses_another_input(api: Api) -> None:
    body = {"processing_version": "v1", "input": {"a": 1}}
    prepared = api.post(f"{OP}/prepare", body)
    assert prepared.status_code == 200
    assert prepared.json()["state"] == "prepared" and prepared.json()["decision"] is None
    clash = api.post(f"{OP}/prepare", {**body, "input": {"a": 2}})
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "input_mismatch"


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/operations/nope/confirm", {"receipt": "R"}, 404, "not_found"),
        ("/v1/operations/nope/fail", {"outcome": "rejected"}, 404, "not_found"),
        (f"{OP}/fail", {"outcome": "rejected"}, 409, "illegal_transition"),
        (f"{OP}/confirm", {"receipt": "R"}, 409, "illegal_transition"),
    ],
)
def test_domain_errors_map_to_http_codes(
    api: Api, path: str, body: dict[str, object], status: int, code: str
) -> None:
    api.post(f"{OP}/prepare", {"processing_version": "v1", "input": 1})
    answer = api.post(path, body)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code


def test_invalid_input_from_the_services_is_422_with_its_field(api: Api) -> None:
    body = dispatch_body(input_hash="sha256:" + "0" * 64)  # both input and its hash
    answer = api.post(f"{OP}/dispatch", body)
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "input_hash"


def test_operation_ids_may_contain_slashes(api: Api) -> None:
    answer = api.post("/v1/operations/crm/contact/42/dispatch", dispatch_body())
    assert answer.json()["operation_id"] == "crm/contact/42"
    assert api.get("/v1/operations/crm/contact/42").json()["operation"]["state"] == "dispatching"


def test_n8n_error_hook_holds_what_the_execution_left_dispatching(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body("11"))
    api.post("/v1/operations/other/dispatch", dispatch_body("12"))
    api.post("/v1/operations/done/dispatch", dispatch_body("11"))
    api.post("/v1/operations/done/confirm", {"receipt": "R"})
    payload = {
        "execution": {
            "id": "11",
            "url": "http://n8n.local/workflow/wf/executions/11",
            "error": {
                "message": "Request failed with status code 422",
                "name": "NodeApiError",
                "httpCode": "422",
                "description": "CONTEXT-SECRET-DESCRIPTION",
                "node": {"name": "Write", "type": "n8n-nodes-base.httpRequest"},
                "context": {
                    "request": {
                        "body": {"card": "CONTEXT-SECRET-BODY"},
                        "headers": {"authorization": "Bearer CONTEXT-SECRET-HEADER"},
                    }
                },
                "stack": "Error: CONTEXT-SECRET-STACK\n    at Write",
            },
            "lastNodeExecuted": "Write",
            "mode": "webhook",
        },
        "workflow": {"id": "wf", "name": "send invoices"},
    }
    hooked = api.post("/v1/hooks/n8n/error", payload)
    assert hooked.status_code == 200
    assert hooked.json()["matched"] == 1
    assert hooked.json()["holds"][0]["operation_id"] == "invoice:INV-42:send"
    held = api.post(f"{OP}/dispatch", dispatch_body("13"))
    assert held.json()["reason"] == "execution_failed"
    assert api.post("/v1/operations/other/dispatch", dispatch_body("12")).json()["decision"] == "go"

    again = api.post("/v1/hooks/n8n/error", payload)
    assert again.json()["holds"] == [{"operation_id": "invoice:INV-42:send", "hold_id": None}]
    with api.ledger.store.reader.connect() as conn:
        holds = table(Hold)
        # (13 after 11, one workflow, at once: a twin trigger has a hold of its own)
        failed = holds.c.reason == "execution_failed"
        detail = conn.execute(sa.select(holds.c.detail).where(failed)).scalar_one()
        dumped = repr(conn.execute(sa.text("SELECT * FROM events")).all()) + detail
    assert "NodeApiError" in detail and "Write" in detail and "422" in detail
    assert "CONTEXT-SECRET" not in dumped


def test_n8n_error_hook_without_an_execution_matches_nothing(api: Api) -> None:
    answer = api.post("/v1/hooks/n8n/error", {"trigger": {"error": {"message": "x"}}})
    assert answer.status_code == 200
    assert answer.json() == {"execution_id": None, "matched": 0, "holds": []}
