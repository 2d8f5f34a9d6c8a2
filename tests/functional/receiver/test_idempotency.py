"""Idempotency-Key: replay, reuse with another body, per-token scope, expiry, and errors that
are not stored."""

from __future__ import annotations

import sqlalchemy as sa

from flowledger.storage.models import IdempotencyKey, table
from tests.support.builders import FakeClock, dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import Api, make_token

OP = "/v1/operations/op-1"


def key(value: str) -> dict[str, str]:
    return {"Idempotency-Key": value}


def test_same_key_and_body_replays_the_stored_answer(api: Api) -> None:
    first = api.post(f"{OP}/dispatch", dispatch_body(), headers=key("k-1"))
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    api.post(f"{OP}/confirm", {"receipt": "R-1"})
    before = snapshot(api.ledger.store)
    again = api.post(f"{OP}/dispatch", dispatch_body(), headers=key("k-1"))
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content  # the stored "go", not today's "skip"
    assert snapshot(api.ledger.store) == before


def test_same_key_with_another_body_is_422(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body(), headers=key("k-1"))
    before = snapshot(api.ledger.store)
    other = api.post(f"{OP}/dispatch", dispatch_body("exec-2"), headers=key("k-1"))
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert snapshot(api.ledger.store) == before


def test_same_key_on_another_path_is_another_request(api: Api) -> None:
    body = {"processing_version": "v1", "input": 1}
    assert api.post(f"{OP}/prepare", body, headers=key("k")).status_code == 200
    before = snapshot(api.ledger.store)
    other = api.post("/v1/operations/op-2/prepare", body, headers=key("k"))
    assert (other.status_code, other.json()) == (
        422,
        {
            "error": {
                "code": "idempotency_key_reused",
                "message": "this Idempotency-Key was used with a different request",
                "field": "Idempotency-Key",
            }
        },
    )
    assert "idempotent-replayed" not in other.headers
    assert snapshot(api.ledger.store) == before  # no op-2, no second key


def test_keys_are_scoped_per_token(api: Api) -> None:
    other_token = make_token(api.ledger, "second-writer", "write")
    api.post(f"{OP}/dispatch", dispatch_body(), headers=key("shared"))
    held = api.post(
        f"{OP}/dispatch", dispatch_body("exec-2"), headers=key("shared"), token=other_token
    )
    assert held.status_code == 200
    assert "idempotent-replayed" not in held.headers
    assert held.json()["decision"] == "hold"


def test_an_error_answer_is_not_stored(api: Api) -> None:
    missing = api.post(f"{OP}/confirm", {"receipt": "R-1"}, headers=key("c-1"))
    assert missing.status_code == 404
    with api.ledger.store.reader.connect() as conn:
        assert (
            conn.execute(sa.select(sa.func.count()).select_from(table(IdempotencyKey))).scalar()
            == 0
        )
    api.post(f"{OP}/dispatch", dispatch_body())
    done = api.post(f"{OP}/confirm", {"receipt": "R-1"}, headers=key("c-1"))
    assert done.status_code == 200 and done.json()["state"] == "confirmed"


def test_an_expired_key_is_forgotten(api: Api, clock: FakeClock) -> None:
    api.post(f"{OP}/prepare", {"processing_version": "v1", "input": 1}, headers=key("k"))
    clock.advance(hours=24, seconds=1)
    fresh = api.post(
        "/v1/operations/op-2/prepare", {"processing_version": "v1", "input": 2}, headers=key("k")
    )
    assert fresh.status_code == 200 and "idempotent-replayed" not in fresh.headers
    assert fresh.json()["operation_id"] == "op-2"


def test_the_stored_answer_is_written_with_the_change(api: Api) -> None:
    api.post(f"{OP}/dispatch", dispatch_body(), headers=key("k-1"))
    with api.ledger.store.reader.connect() as conn:
        row = conn.execute(sa.select(table(IdempotencyKey))).one()
    assert row.status == "completed" and row.response_status == 200
    assert '"decision":"go"' in row.response_body
