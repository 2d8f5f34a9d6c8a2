"""How the client calls: what it retries (no answer, 5xx, 429, a key still running) with the
same key and doubling waits, what it refuses at once, and where it finds the ledger."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from flowledger.client import AsyncLedger, Ledger, LedgerError

Handler = Callable[[httpx.Request], httpx.Response]
GO = {"decision": "go", "attempt": 1, "state": "dispatching", "reason": None, "receipt": None}


def ledger(handler: Handler, waits: list[float], **kw: object) -> Ledger:
    return Ledger(
        "http://ledger.test/",
        token="tok",
        transport=httpx.MockTransport(handler),
        sleep=waits.append,
        **kw,  # type: ignore[arg-type]
    )


def guard(client: Ledger) -> object:
    return client.guard("op-1", input={"a": 1}, version="v1", execution_id="e1")


@pytest.mark.parametrize(
    "failure",
    [
        httpx.Response(503, json={"error": {"code": "unavailable", "message": "down"}}),
        httpx.Response(429, json={"error": {"code": "too_many_connections", "message": "x"}}),
        httpx.Response(409, json={"error": {"code": "idempotency_in_flight", "message": "x"}}),
        httpx.ConnectError("refused"),
    ],
    ids=["503", "429", "409-in-flight", "no-answer"],
)
def test_what_may_have_been_done_is_retried_with_the_same_key(
    failure: httpx.Response | Exception,
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) < 3:
            if isinstance(failure, Exception):
                raise failure
            return failure
        return httpx.Response(200, json=GO)

    waits: list[float] = []
    with ledger(handler, waits).guard("op-1", input={"a": 1}, version="v1", execution_id="e1") as g:
        assert g.go
        g.release()
    dispatches = [r for r in seen if r.url.path.endswith("/dispatch")]
    assert len(dispatches) == 3
    assert len({r.headers["Idempotency-Key"] for r in dispatches}) == 1
    assert waits[:2] == [0.5, 1.0]


def test_a_ledger_that_stays_down_is_an_error_after_every_try() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(503, json={"error": {"code": "unavailable", "message": "down"}})

    waits: list[float] = []
    with pytest.raises(LedgerError, match="after 4 tries") as error:
        guard(ledger(handler, waits)).__enter__()  # type: ignore[attr-defined]
    assert len(calls) == 4 and waits == [0.5, 1.0, 2.0]
    assert (error.value.status, error.value.code) == (503, "unavailable")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 422])
def test_any_other_refusal_is_raised_at_once_with_the_ledgers_words(status: int) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        body = {"error": {"code": "nope", "message": "refused here", "field": "input"}}
        return httpx.Response(status, json=body)

    with pytest.raises(LedgerError, match="refused here") as error:
        guard(ledger(handler, [])).__enter__()  # type: ignore[attr-defined]
    assert len(calls) == 1
    assert (error.value.status, error.value.code, error.value.field) == (status, "nope", "input")


def test_an_answer_that_is_not_the_ledgers_json_is_an_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy</html>")

    with pytest.raises(LedgerError, match="without JSON"):
        guard(ledger(handler, [])).__enter__()  # type: ignore[attr-defined]


def test_the_ledger_is_found_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWLEDGER_URL", "http://from-env:8787")
    monkeypatch.setenv("FLOWLEDGER_TOKEN", "env-token")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"name": "n", "scope": "write", "signing": False})

    Ledger(transport=httpx.MockTransport(handler)).token_info()
    assert str(seen[0].url) == "http://from-env:8787/v1/token"
    assert seen[0].headers["Authorization"] == "Bearer env-token"


@pytest.mark.parametrize(("url", "token"), [("", "t"), ("ledger:8787", "t"), ("http://l", "")])
def test_a_ledger_without_an_address_or_a_token_is_refused(
    monkeypatch: pytest.MonkeyPatch, url: str, token: str
) -> None:
    monkeypatch.delenv("FLOWLEDGER_URL", raising=False)
    monkeypatch.delenv("FLOWLEDGER_TOKEN", raising=False)
    with pytest.raises(ValueError):
        Ledger(url, token=token)


def test_the_dispatch_body_is_the_ledgers_and_leaves_out_what_is_not_given() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={**GO, "decision": "skip", "receipt": "r-1"})

    with ledger(handler, []).guard(
        "a/b:c", input={"a": 1}, version="v1", execution_id="e1", step="send"
    ) as g:
        assert g.skip and g.receipt == "r-1"
    assert seen[0].url.raw_path == b"/v1/operations/a%2Fb%3Ac/dispatch"
    assert json.loads(seen[0].content) == {
        "input": {"a": 1},
        "processing_version": "v1",
        "execution_id": "e1",
        "run_index": 0,
        "step": "send",
    }


async def test_the_async_client_retries_the_same_way() -> None:
    seen: list[httpx.Request] = []
    waits: list[float] = []

    async def wait(seconds: float) -> None:
        waits.append(seconds)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            raise httpx.ReadTimeout("lost", request=request)
        if request.url.path.endswith("/dispatch"):
            return httpx.Response(200, json=GO)
        return httpx.Response(200, json={**GO, "decision": None, "state": "confirmed"})

    async with (
        AsyncLedger(
            "http://ledger.test", token="tok", transport=httpx.MockTransport(handler), sleep=wait
        ) as client,
        client.guard("op-1", input={"a": 1}, version="v1", execution_id="e1") as g,
    ):
        assert g.go
        await g.confirm("msg-1")
    assert [r.url.path.rsplit("/", 1)[1] for r in seen] == ["dispatch", "dispatch", "confirm"]
    assert seen[0].headers["Idempotency-Key"] == seen[1].headers["Idempotency-Key"]
    assert waits == [0.5]
