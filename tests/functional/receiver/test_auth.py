"""Tokens, scopes and signatures: every refusal is 401/403 in the one error shape, and leaves
the database exactly as it was."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app as _app  # noqa: F401  (registers the commands)
from flowledger.cli.common import app
from flowledger.domain.hashing import token_digest
from flowledger.receiver.api import tokens as tokens_module
from flowledger.receiver.api.tokens import TokenCache, list_tokens, revoke_token
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from tests.support.builders import dispatch_body
from tests.support.database import snapshot
from tests.support.receiver import (
    SECRET,
    Api,
    make_signing_token,
    make_token,
    receiver_config,
    running,
    signature,
)

DISPATCH = "/v1/operations/op-1/dispatch"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: these refusals happen before any database work (the decisions, idempotency
    and read tests run on both backends)."""
    return str(tmp_path / "ledger.db")


def _refused(api: Api, status: int, code: str, **kw: object) -> None:
    before = snapshot(api.ledger.store)
    answer = api.post(DISPATCH, dispatch_body(), **kw)  # type: ignore[arg-type]
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code
    assert snapshot(api.ledger.store) == before


def test_no_token_is_401_with_a_challenge(api: Api) -> None:
    _refused(api, 401, "missing_token", token=None)
    assert api.post(DISPATCH, dispatch_body(), token=None).headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer   ", "token"])
def test_malformed_authorization_is_401(api: Api, header: str) -> None:
    _refused(api, 401, "missing_token", token=None, headers={"Authorization": header})


def test_unknown_token_is_401(api: Api) -> None:
    _refused(api, 401, "unknown_token", token="flt_not-a-real-token")


def test_revoked_token_is_401(api: Api) -> None:
    revoke_token(api.ledger, "write")
    _refused(api, 401, "unknown_token")


def test_a_token_known_by_itself_is_looked_up_again_after_a_reload(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token that matched is remembered by itself (not hashed again) until the next
    reload, which forgets it: a revocation takes effect at the reload, as before."""
    hashed: list[str] = []

    def digest(token: str) -> str:
        hashed.append(token)
        return token_digest(token)

    token = make_token(ledger, "remembered")
    cache = TokenCache(ledger.store, ttl=3600.0)
    cache.reload()
    monkeypatch.setattr(tokens_module, "token_digest", digest)
    found = cache.find(token)
    assert found is not None and found.name == "remembered"
    assert cache.find(token) == found and hashed == [token]  # the second time by itself
    assert cache.find(token + "x") is None and cache.find(token[:-1]) is None
    assert cache.find(token + "x") is None  # a miss is never remembered: hashed each time
    assert hashed == [token, token + "x", token[:-1], token + "x"]
    revoke_token(ledger, "remembered")
    assert cache.find(token) == found  # the cache is fresh: revoked within its ttl
    cache.reload()
    assert cache.find(token) is None and hashed[-1] == token


def test_read_token_may_not_write_and_write_token_may_not_read(api: Api) -> None:
    _refused(api, 403, "forbidden", token="read")
    assert api.get("/v1/operations", token="write").status_code == 403
    assert api.post("/v1/hooks/n8n/error", {}, token="read").status_code == 403


def test_operator_token_may_do_everything(api: Api) -> None:
    assert api.post(DISPATCH, dispatch_body(), token="operator").json()["decision"] == "go"
    assert api.get("/v1/operations", token="operator").status_code == 200


def _signed(
    api: Api, stamp: int | None = None, tamper: bool = False, path: str = DISPATCH
) -> tuple[str, dict[str, str]]:
    token, key = make_signing_token(api.ledger, "signer")
    body = json.dumps(dispatch_body()).encode()
    sig = signature(key, path, body + (b" " if tamper else b""), stamp)
    return token, {"X-Flowledger-Signature": sig, "Content-Type": "application/json"}


def test_signed_request_is_accepted(api: Api) -> None:
    token, headers = _signed(api)
    answer = api.post(DISPATCH, token=token, headers=headers, content=json.dumps(dispatch_body()))
    assert answer.status_code == 200 and answer.json()["decision"] == "go"


def test_a_signed_request_with_a_query_signs_the_query_too(api: Api) -> None:
    token, headers = _signed(api, path=f"{DISPATCH}?note=a%20b")
    body = json.dumps(dispatch_body())
    moved = api.post(f"{DISPATCH}?note=other", token=token, headers=headers, content=body)
    assert moved.status_code == 401 and moved.json()["error"]["code"] == "bad_signature"
    answer = api.post(f"{DISPATCH}?note=a%20b", token=token, headers=headers, content=body)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "elsewhere",
    ["/v1/operations/op-OTHER/dispatch", "/v1/operations/op-1/prepare"],
    ids=["another-operation", "another-call"],
)
def test_a_signed_request_moved_to_another_path_is_401(api: Api, elsewhere: str) -> None:
    token, headers = _signed(api)
    body = json.dumps(dispatch_body())
    before = snapshot(api.ledger.store)
    moved = api.post(elsewhere, token=token, headers=headers, content=body)
    assert moved.status_code == 401 and moved.json()["error"]["code"] == "bad_signature"
    assert snapshot(api.ledger.store) == before
    signed_for = api.post(DISPATCH, token=token, headers=headers, content=body)
    assert signed_for.status_code == 200, signed_for.text


def test_a_signed_request_is_accepted_once(api: Api) -> None:
    token, headers = _signed(api)
    body = json.dumps(dispatch_body())
    assert api.post(DISPATCH, token=token, headers=headers, content=body).status_code == 200
    before = snapshot(api.ledger.store)
    again = api.post(DISPATCH, token=token, headers=headers, content=body)
    assert again.status_code == 401, again.text
    assert again.json()["error"] == {
        "code": "replayed_signature",
        "message": "this signed request was accepted before",
        "field": None,
    }
    assert snapshot(api.ledger.store) == before


def test_a_v1_signature_is_refused_saying_to_upgrade(api: Api) -> None:
    token, key = make_signing_token(api.ledger, "signer")
    body = json.dumps(dispatch_body()).encode()
    stamp = int(time.time())
    v1 = hmac.new(key, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {"X-Flowledger-Signature": f"t={stamp},v1={v1}", "Content-Type": "application/json"}
    answer = api.post(DISPATCH, token=token, headers=headers, content=body)
    assert answer.status_code == 401
    error = answer.json()["error"]
    assert error["code"] == "signature_upgrade" and "v2" in error["message"]


@pytest.mark.parametrize(
    ("skew", "tamper", "code"),
    [(0, True, "bad_signature"), (-400, False, "stale_signature"), (400, False, "stale_signature")],
)
def test_bad_or_stale_signature_is_401(api: Api, skew: int, tamper: bool, code: str) -> None:
    token, headers = _signed(api, int(time.time()) + skew, tamper)
    _refused(api, 401, code, token=token, headers=headers, content=json.dumps(dispatch_body()))


@pytest.mark.parametrize("value", [None, "garbage", "t=abc,v2=00", "t=1"])
def test_signing_token_without_a_valid_signature_header_is_401(api: Api, value: str | None) -> None:
    token, _ = make_signing_token(api.ledger, "signer")
    headers = {} if value is None else {"X-Flowledger-Signature": value}
    code = "signature_required" if value is None else "bad_signature"
    _refused(api, 401, code, token=token, headers=headers)


@pytest.mark.parametrize("stamp", ["now", "²"])
def test_a_signature_header_with_non_ascii_is_401_not_a_server_error(api: Api, stamp: str) -> None:
    token, _ = make_signing_token(api.ledger, "signer")
    t = str(int(time.time())) if stamp == "now" else stamp
    value = f"t={t},v2={'é' * 64 if stamp == 'now' else '00'}".encode("latin-1", "replace")
    headers = {"X-Flowledger-Signature": value, "Content-Type": "application/json"}
    _refused(api, 401, "bad_signature", token=token, headers=headers)


def test_token_cli_shows_the_token_once_and_stores_only_its_hash(db_url: str) -> None:
    runner = CliRunner()
    env = {"FLOWLEDGER_DB": db_url, "FLOWLEDGER_SECRET": "s3cret"}
    assert runner.invoke(app, ["init"], env=env).exit_code == 0
    made = runner.invoke(
        app, ["token", "create", "--name", "n8n-prod", "--scope", "write", "--signing"], env=env
    )
    assert made.exit_code == 0, made.output
    lines = made.output.splitlines()
    token, secret = lines[1], lines[3]
    assert token.startswith("flt_") and len(secret) == 64
    listed = runner.invoke(app, ["token", "list"], env=env)
    header, row = listed.output.splitlines()
    assert header.split() == ["NAME", "SCOPE", "SIGNING", "CREATED", "LAST", "USED", "STATE"]
    assert row.split()[:3] == ["n8n-prod", "write", "yes"] and row.split()[-1] == "active"
    assert token not in listed.output and secret not in listed.output

    from flowledger.storage.engine import open_store

    store = open_store(db_url)
    try:
        dumped = repr(snapshot(store))
    finally:
        store.dispose()
    assert token_digest(token) in dumped
    assert token not in dumped and secret not in dumped

    dup = runner.invoke(app, ["token", "create", "--name", "n8n-prod", "--scope", "read"], env=env)
    assert dup.exit_code == 2 and "exists" in dup.output
    bad = runner.invoke(app, ["token", "create", "--name", "x", "--scope", "admin"], env=env)
    assert bad.exit_code == 2 and "scope" in bad.output
    assert runner.invoke(app, ["token", "revoke", "n8n-prod"], env=env).exit_code == 0
    again = runner.invoke(app, ["token", "revoke", "n8n-prod"], env=env)
    assert (
        again.exit_code == 3 and "no active token named 'n8n-prod': it is revoked" in again.output
    )


def test_signing_needs_the_server_secret(db_url: str) -> None:
    runner = CliRunner()
    env = {"FLOWLEDGER_DB": db_url, "FLOWLEDGER_SECRET": ""}
    runner.invoke(app, ["init"], env=env)
    made = runner.invoke(
        app, ["token", "create", "--name", "a", "--scope", "write", "--signing"], env=env
    )
    assert made.exit_code == 2 and "FLOWLEDGER_SECRET" in made.output


def test_when_a_token_was_last_used_is_written_by_the_receiver_not_by_each_request(
    ledger: Ledger, db_url: str
) -> None:
    tokens = {scope: make_token(ledger, scope, scope) for scope in ("write", "read")}
    receiver = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with running(receiver, ledger, tokens) as api:
        before = snapshot(ledger.store)
        assert api.post(DISPATCH, dispatch_body(), headers=IDEMPOTENT).status_code == 200
        assert api.post(DISPATCH, dispatch_body(), headers=IDEMPOTENT).status_code == 200
        assert _last_used(ledger) == {"write": None, "read": None}  # not yet written
        assert snapshot(ledger.store) != before  # (the dispatch itself was)
    used = _last_used(ledger)  # the receiver stopped: what it saw is written
    assert used["read"] is None and used["write"] is not None
    assert abs(used["write"].timestamp() - time.time()) < 600

    listed = CliRunner().invoke(app, ["token", "list"], env={"FLOWLEDGER_DB": db_url})
    lines = {line.split()[0]: line for line in listed.output.splitlines()}
    assert lines["read"].split()[-2:] == ["never", "active"]
    assert f"{used['write']:%Y-%m-%d %H:%M:%S} UTC  active" in lines["write"]


IDEMPOTENT = {"Idempotency-Key": "k-1"}


def _last_used(ledger: Ledger) -> dict[str, Any]:
    return {r["name"]: r["last_used_at"] for r in list_tokens(ledger.store)}


def _cached_app(ledger: Ledger, tokens: dict[str, str]) -> Any:
    """Tokens cached for an hour: only a miss can make the receiver look again."""
    return create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=3600.0)


def test_a_token_created_after_the_cache_was_filled_works_on_its_first_call(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`token create` then the first call at once (what `flowledger n8n setup` and a person
    pasting the token do): the miss reloads the cache instead of answering unknown_token."""
    monkeypatch.setattr(tokens_module, "MISS_RELOAD", 0.0)
    tokens = {"write": make_token(ledger, "write")}
    with running(_cached_app(ledger, tokens), ledger, tokens) as api:
        assert api.post(DISPATCH, dispatch_body()).status_code == 200  # the cache is filled
        tokens["late"] = make_token(ledger, "late")
        answer = api.post("/v1/operations/op-2/dispatch", dispatch_body(), token="late")
        assert answer.status_code == 200, answer.text


def test_unknown_tokens_in_a_loop_do_not_reload_the_cache_each_time(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens_module, "MISS_RELOAD", 3600.0)
    reloads: list[None] = []
    real = tokens_module.TokenCache.reload

    def counted(self: Any) -> None:
        reloads.append(None)
        real(self)

    monkeypatch.setattr(tokens_module.TokenCache, "reload", counted)
    tokens = {"write": make_token(ledger, "write")}
    with running(_cached_app(ledger, tokens), ledger, tokens) as api:
        for n in range(20):
            answer = api.post(DISPATCH, dispatch_body(), token=f"flt_guess-{n}")
            assert answer.json()["error"]["code"] == "unknown_token"
    assert len(reloads) == 1  # the first fill only
