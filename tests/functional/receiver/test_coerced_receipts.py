"""A confirm whose receipt is empty or a JavaScript coercion artefact is refused, by the API
(422 naming ``receipt``) and by the services alike, and changes nothing: the operation stays
``dispatching`` and the next dispatch is not answered ``skip`` with a meaningless receipt."""

from __future__ import annotations

from typing import Any

import pytest

from flowledger.services.ledger import InvalidInput
from tests.functional.receiver.conftest import Api

OP = "/v1/operations/invoice:INV-7:send"
COERCED = ["undefined", "null", "[object Object]", "NaN", "", "  "]


def _dispatch(api: Api, execution_id: str = "11") -> dict[str, Any]:
    body = {"processing_version": "v1", "execution_id": execution_id, "input": {"n": 7}}
    answer = api.post(f"{OP}/dispatch", body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("receipt", COERCED)
def test_the_api_refuses_a_coerced_receipt_naming_the_field(api: Api, receipt: str) -> None:
    assert _dispatch(api)["decision"] == "go"
    answer = api.post(f"{OP}/confirm", {"receipt": receipt, "execution_id": "11"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "receipt"
    state = api.get(OP, token="read").json()["operation"]["state"]
    assert state == "dispatching"
    assert _dispatch(api)["decision"] == "go"  # the same execution's replay, not a skip


@pytest.mark.parametrize("receipt", COERCED)
def test_the_services_refuse_a_coerced_receipt_whoever_calls(api: Api, receipt: str) -> None:
    _dispatch(api)
    with pytest.raises(InvalidInput) as refused:
        api.ledger.confirm("invoice:INV-7:send", receipt).run("cli")
    assert refused.value.field == "receipt"


def test_a_real_receipt_is_still_confirmed(api: Api) -> None:
    _dispatch(api)
    answer = api.post(f"{OP}/confirm", {"receipt": "CRM-991", "execution_id": "11"})
    assert (answer.status_code, answer.json()["state"]) == (200, "confirmed")
    assert _dispatch(api, "12")["decision"] == "skip"
