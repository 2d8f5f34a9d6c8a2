"""``GET /v1/token``: any valid token learns its own name, scope and signing (what the n8n
credential test shows); an unknown token is 401 and nothing else is said."""

from __future__ import annotations

import pytest

from tests.functional.receiver.conftest import Api


@pytest.mark.parametrize("scope", ["write", "read", "operator"])
def test_every_scope_may_ask_which_token_it_is(api: Api, scope: str) -> None:
    answer = api.get("/v1/token", token=scope)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"name": scope, "scope": scope, "signing": False}


def test_an_unknown_token_is_401(api: Api) -> None:
    answer = api.get("/v1/token", token="flt_nobody")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unknown_token"


def test_no_token_is_401(api: Api) -> None:
    assert api.get("/v1/token", token=None).status_code == 401
