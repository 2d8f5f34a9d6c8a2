"""The API's release with ``"retry": true``: refused (409 ``retry_not_possible``) for an
execution not known to have failed, recorded once for one that did, shown with the
operation."""

from __future__ import annotations

from flowledger.services.ledger import Ledger
from tests.support.builders import dispatch_body
from tests.support.receiver import Api

OP = "/v1/operations/invoice:INV-42:send"


def test_the_release_takes_retry_only_where_n8n_can_retry(api: Api, ledger: Ledger) -> None:
    api.post(f"{OP}/dispatch", dispatch_body("31"))
    api.post(f"{OP}/fail", {"outcome": "unknown", "error": "timeout"})
    (unknown,) = api.get("/v1/holds").json()["items"]
    refused = api.post(
        f"/v1/holds/{unknown['id']}/release", {"note": "n", "retry": True}, token="operator"
    )
    assert refused.status_code == 409
    assert refused.json()["error"] == {
        "code": "retry_not_possible",
        "message": "execution 31 is not known to have failed or crashed (the ledger has no "
        "copy); n8n retries only those",
        "field": "retry",
    }
    assert api.get(f"/v1/holds/{unknown['id']}").json()["resolved_at"] is None

    ((_, failed),) = ledger.execution_failed("31", "crashed").run("hook")
    wrong = api.post(f"/v1/holds/{failed}/release", {"note": "n", "retry": "yes"}, token="operator")
    assert wrong.status_code == 422
    done = api.post(f"/v1/holds/{failed}/release", {"note": "n", "retry": True}, token="operator")
    assert done.status_code == 200, done.text
    assert done.json()["resolution"] is not None
    (retry,) = api.get(OP).json()["retries"]
    assert (retry["execution_id"], retry["asked_by"], retry["outcome"]) == (
        "31", "operator:operator", None,
    )  # fmt: skip
