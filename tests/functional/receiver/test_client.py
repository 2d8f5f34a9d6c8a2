"""The Python client guards writes against the real receiver (in process, on SQLite and on
PostgreSQL): go then confirm, skip with the receipt, holds raised, an exception recorded as a
failure, a lost answer retried as a replay, signatures the receiver verifies, and ids built
from missing values refused before any call."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from flowledger.client import (
    AsyncLedger,
    Held,
    InvalidCall,
    Ledger,
    LedgerError,
    ReceiptConflict,
    Rejected,
    Unfinished,
)
from flowledger.domain.hashing import input_hash as ledger_input_hash
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger as LedgerService
from tests.support.client import AsyncToApi, ToApi, losing_first
from tests.support.receiver import (
    SECRET,
    Api,
    auth,
    make_signing_token,
    make_token,
    receiver_config,
    server_thread,
)

OP = "invoice:INV-42:send"
PAYLOAD = {"invoice": "INV-42", "amount": 1200}
# seconds: the client's timeout where a test has one answer held back, long enough for every
# other answer on a loaded machine
TIMEOUT = 3.0


def client(api: Api, token: str = "write", **kw: Any) -> tuple[Ledger, ToApi]:
    transport = kw.pop("transport", None) or ToApi(api)
    ledger = Ledger(
        "http://ledger.test",
        token=api.tokens.get(token, token),
        transport=transport,
        first_wait=0.0,
        **kw,
    )
    return ledger, transport


@pytest.fixture
def flow(api: Api) -> Iterator[Ledger]:
    """A workflow's client with a write token."""
    made, _ = client(api)
    yield made
    made.close()


def operation(api: Api, operation_id: str = OP) -> dict[str, Any]:
    answer = api.get(f"/v1/operations/{operation_id}", token="operator")
    assert answer.status_code == 200, answer.text
    return answer.json()


def open_holds(api: Api, operation_id: str = OP) -> list[str]:
    return [h["reason"] for h in operation(api, operation_id)["holds"] if h["resolved_at"] is None]


def test_a_go_is_written_then_confirmed_and_the_next_run_skips_with_the_receipt(
    flow: Ledger, api: Api
) -> None:
    written = []
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        assert g.go and not g.skip and g.attempt == 1
        written.append("msg-6017")
        g.confirm("msg-6017")
    assert operation(api)["operation"]["state"] == "confirmed"
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-2") as again:
        if again.go:
            written.append("twice")
    assert again.skip and again.receipt == "msg-6017"
    assert written == ["msg-6017"]


def test_another_input_raises_held_with_the_reason_and_the_hold_id(api: Api) -> None:
    operator, _ = client(api, "operator")
    with operator.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.confirm("msg-1")
    with (
        pytest.raises(Held) as held,
        operator.guard(OP, input={**PAYLOAD, "amount": 1300}, version="v3", execution_id="run-2"),
    ):
        pytest.fail("a held write must not run")
    assert held.value.reason == "input_mismatch"
    (hold,) = [h for h in operation(api)["holds"] if h["reason"] == "input_mismatch"]
    assert held.value.hold_id == hold["id"]


def test_a_write_token_gets_the_hold_id_from_the_dispatch_answer_itself(
    flow: Ledger, api: Api
) -> None:
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.confirm("msg-1")
    with (
        pytest.raises(Held) as held,
        flow.guard(OP, input=PAYLOAD, version="v4", execution_id="r2"),
    ):
        pass
    (hold,) = [h for h in operation(api)["holds"] if h["reason"] == "version_mismatch"]
    assert (held.value.reason, held.value.hold_id) == ("version_mismatch", hold["id"])


def test_an_exception_after_go_is_recorded_as_unknown_and_held_for_a_person(
    flow: Ledger, api: Api
) -> None:
    with (
        pytest.raises(TimeoutError),
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g,
    ):
        assert g.go
        raise TimeoutError("the mail provider did not answer")
    assert operation(api)["operation"]["state"] == "dispatching"
    assert open_holds(api) == ["unknown_outcome"]


def test_a_rejection_the_code_names_is_recorded_as_rejected_and_may_be_sent_again(
    flow: Ledger, api: Api
) -> None:
    with (
        pytest.raises(Rejected),
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1"),
    ):
        raise Rejected("422 from the provider: no such customer")
    assert operation(api)["operation"]["state"] == "failed"
    assert open_holds(api) == []
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-2") as g:
        assert g.go and g.attempt == 2
        g.fail("refused again", rejected=True)
    assert operation(api)["operation"]["state"] == "failed"


def test_a_block_that_ends_without_confirm_or_fail_is_recorded_as_unknown(
    flow: Ledger, api: Api
) -> None:
    with (
        pytest.raises(Unfinished),
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1"),
    ):
        pass
    assert open_holds(api) == ["unknown_outcome"]


def test_a_go_given_back_unwritten_is_prepared_again(flow: Ledger, api: Api) -> None:
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.release("the invoice was withdrawn before sending")
    assert operation(api)["operation"]["state"] == "prepared"
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as again:
        assert again.go
        again.confirm("msg-2")


def test_a_run_started_again_under_the_same_id_after_a_crash_mid_write_is_held(
    flow: Ledger, api: Api
) -> None:
    crashed = flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1")
    assert crashed.__enter__().go  # and the process died while writing
    written = []
    with (
        pytest.raises(Held) as held,
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as again,
    ):
        written.append(again.go)
    assert held.value.reason == "unknown_outcome" and written == []
    assert open_holds(api) == ["unknown_outcome"]


def test_a_guard_of_the_same_run_after_the_write_was_confirmed_writes_nothing(
    flow: Ledger, api: Api
) -> None:
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.confirm("msg-1")
    with (
        pytest.raises(LedgerError) as refused,
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1"),
    ):
        pytest.fail("written twice")
    assert refused.value.code == "earlier_go"
    assert operation(api)["operation"]["state"] == "confirmed" and open_holds(api) == []


@pytest.mark.parametrize("call", ["dispatch", "confirm"])
def test_a_lost_answer_is_sent_again_with_the_same_key_and_replayed(api: Api, call: str) -> None:
    ledger, transport = client(api, transport=ToApi(api, lose=losing_first(call)))
    with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        assert g.go
        g.confirm("msg-6017")
    tries = [(r, a) for r, a in transport.seen if r.url.path.endswith(f"/{call}")]
    assert len(tries) == 2 and tries[0][1] is None
    assert tries[0][0].headers["Idempotency-Key"] == tries[1][0].headers["Idempotency-Key"]
    assert tries[1][1] is not None and tries[1][1].headers.get("Idempotent-Replayed") == "true"
    record = operation(api)
    assert record["operation"]["state"] == "confirmed" and len(record["attempts"]) == 1
    assert open_holds(api) == []


def test_every_request_of_a_signing_token_is_signed_and_verified(api: Api) -> None:
    token, key = make_signing_token(api.ledger, "signer")
    lose = losing_first("confirm")
    now = time.time()  # one second for every try: the retry must stamp itself a second on
    ledger, transport = client(
        api, token, signing_secret=key.hex(), transport=ToApi(api, lose=lose), clock=lambda: now
    )
    with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.confirm("msg-6017")
    assert operation(api)["operation"]["state"] == "confirmed"
    stamps = [r.headers["X-Flowledger-Signature"].split(",")[0] for r, _ in transport.seen]
    assert len(stamps) == 3 and len(set(stamps[1:])) == 2


def test_a_signing_token_without_its_secret_is_refused_by_the_receiver(api: Api) -> None:
    token, _ = make_signing_token(api.ledger, "signer")
    ledger, transport = client(api, token)
    with (
        pytest.raises(LedgerError) as refused,
        ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="r"),
    ):
        pass
    assert refused.value.status == 401 and len(transport.seen) == 1


def test_an_input_hashed_on_the_client_is_the_hash_the_ledger_makes(api: Api) -> None:
    ledger, transport = client(api, hash_inputs=True)
    with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        g.confirm("msg-1")
    sent = transport.seen[0][0].content
    assert b"INV-42" not in sent and b"input_hash" in sent
    assert operation(api)["operation"]["input_hash"] == ledger_input_hash(PAYLOAD)
    raw = api.post(
        f"/v1/operations/{OP}/dispatch",
        {"input": PAYLOAD, "processing_version": "v3", "execution_id": "run-2"},
    )
    assert raw.json()["decision"] == "skip"


@pytest.mark.parametrize(
    ("operation_id", "changes"),
    [
        ("invoice:None:send", {}),
        ("invoice::send", {}),
        ("invoice:undefined:send", {}),
        ("invoice:INV-42\u200b:send", {}),
        (OP, {"execution_id": None}),
        (OP, {"execution_id": ""}),
        (OP, {"execution_id": "None"}),
        (OP, {"version": ""}),
        (OP, {"input": None}),
        (OP, {"input": {"amount": float("nan")}, "hash_input": True}),
    ],
)
def test_a_call_built_from_missing_values_is_refused_before_any_request(
    api: Api, operation_id: str, changes: dict[str, Any]
) -> None:
    ledger, transport = client(api)
    kw: dict[str, Any] = {"input": PAYLOAD, "version": "v3", "execution_id": "run-1", **changes}
    with pytest.raises(InvalidCall):
        ledger.guard(operation_id, **kw)
    assert transport.seen == []


@pytest.mark.parametrize("receipt", [None, "", "undefined", "None"])
def test_a_receipt_that_names_nothing_is_refused_and_the_write_recorded_as_unknown(
    flow: Ledger, api: Api, receipt: object
) -> None:
    with (
        pytest.raises(InvalidCall),
        flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g,
    ):
        g.confirm(receipt)
    assert open_holds(api) == ["unknown_outcome"]


def test_a_confirm_that_conflicts_with_a_recorded_receipt_raises_receipt_conflict(
    flow: Ledger, api: Api
) -> None:
    with flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
        # Someone else recorded a receipt for this write meanwhile.
        other = api.post(f"/v1/operations/{OP}/confirm", {"receipt": "msg-1"})
        assert other.status_code == 200, other.text
        with pytest.raises(ReceiptConflict):
            g.confirm("msg-2")
    assert "receipt_conflict" in open_holds(api)


def test_the_async_client_guards_a_write_in_the_same_way(api: Api) -> None:
    async def run() -> tuple[bool, str | None]:
        async with AsyncLedger(
            "http://ledger.test", token=api.tokens["write"], transport=AsyncToApi(api)
        ) as ledger:
            async with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g:
                assert g.go
                await g.confirm("msg-6017")
            async with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="run-2") as s:
                return s.skip, s.receipt

    assert api.portal.call(run) == (True, "msg-6017")


def test_the_async_client_records_an_exception_after_go(api: Api) -> None:
    async def run() -> None:
        async with AsyncLedger(
            "http://ledger.test", token=api.tokens["write"], transport=AsyncToApi(api)
        ) as ledger:
            with pytest.raises(ConnectionError):
                async with ledger.guard(OP, input=PAYLOAD, version="v3", execution_id="r1"):
                    raise ConnectionError("reset by peer")

    api.portal.call(run)
    assert open_holds(api) == ["unknown_outcome"]


def test_a_confirm_answered_after_the_timeout_is_sent_again_and_replayed(
    ledger: LedgerService,
) -> None:
    """On a real socket: the receiver records the confirm and holds its answer back until the
    confirm sent again is being answered; the client's timeout sends it again with the same
    key, and the stored answer comes back. Synchronised on the second send, not on a time: a
    timeout long enough for a loaded machine's every other answer."""
    token = make_token(ledger, "slow")
    app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    confirms: list[str] = []
    sent_again = threading.Event()  # a later confirm's answer is starting

    async def late_first_confirm(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/confirm"):
            return await app(scope, receive, send)
        confirms.append(scope["path"])
        first = len(confirms) == 1

        async def answer(message: Any) -> None:
            if message["type"] == "http.response.start":
                if first:  # bounded, for a client that never sends it again
                    await anyio.to_thread.run_sync(sent_again.wait, 60.0)
                else:
                    sent_again.set()
            await send(message)

        return await app(scope, receive, answer)

    reader = make_token(ledger, "reader", "read")
    with server_thread(late_first_confirm) as url:  # type: ignore[arg-type]
        with (
            Ledger(url, token=token, timeout=TIMEOUT, first_wait=0.0) as flow,
            flow.guard(OP, input=PAYLOAD, version="v3", execution_id="run-1") as g,
        ):
            started = time.monotonic()
            answer = g.confirm("msg-6017")
            waited = time.monotonic() - started
            answered_again = sent_again.is_set()
        look = f"{url}/v1/operations/{OP}"
        record = httpx.get(look, headers=auth(reader), timeout=60).json()
    assert answer["state"] == "confirmed" and len(confirms) >= 2 and answered_again
    assert waited >= TIMEOUT  # the first send timed out: the second was answered
    assert record["operation"]["state"] == "confirmed" and len(record["receipts"]) == 1
    assert [e["kind"] for e in record["events"]].count("confirmed") == 1
