"""The workflow calls through the writer process (``serve`` and ``run``) answers as the writer
thread does: the same statuses, bodies and replays for the same calls, signatures recorded
once, the secrets of a signing token created while it runs redacted, and its batches and round
trips counted in the receiver's metrics."""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import ConfigDict, PrivateAttr

from flowledger.plumbing.metrics import REGISTRY
from flowledger.receiver.api.calls import CallRequest
from flowledger.receiver.api.reply import Reply
from flowledger.receiver.api.schemas import DispatchCreate
from flowledger.receiver.api.schemas.fields import Accepts
from flowledger.receiver.api.tokens import create_token
from flowledger.receiver.app import create_app
from flowledger.receiver.engine.wire import Frames, pack
from flowledger.services.ledger import Answer, Ledger
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.models import Operation, table
from tests.support.builders import FakeClock, dispatch_body
from tests.support.ledgers import new_ledger
from tests.support.processes import TIMEOUT
from tests.support.receiver import SECRET, Api, make_token, receiver_config, running, signature

OP = "/v1/operations"
HASH = "sha256:" + "b" * 64
# (path, body, Idempotency-Key): every kind of answer the lane gives for a call the writer runs.
SCRIPT: list[tuple[str, Any, str | None]] = [
    (f"{OP}/op-1/dispatch", dispatch_body("exec-1"), None),  # go
    (f"{OP}/op-1/dispatch", dispatch_body("exec-1"), None),  # the same execution again: go
    (f"{OP}/op-1/dispatch", dispatch_body("exec-2"), None),  # another execution: skip
    (f"{OP}/op-1/confirm", {"receipt": "R-1"}, None),
    (f"{OP}/op-1/confirm", {"receipt": "R-2"}, None),  # another receipt
    (f"{OP}/op-1/fail", {"outcome": "unknown", "error": "timeout"}, None),  # illegal: 409
    (f"{OP}/nobody/confirm", {"receipt": "R-1"}, None),  # 404
    (f"{OP}/op-2/dispatch", dispatch_body("exec-3"), "key-1"),
    (f"{OP}/op-2/dispatch", dispatch_body("exec-3"), "key-1"),  # replayed
    (f"{OP}/op-2/dispatch", dispatch_body("exec-4"), "key-1"),  # the key reused: 422
    (f"{OP}/op-2/fail", {"outcome": "unknown", "error": "no answer"}, None),  # a hold
    (f"{OP}/op-2/dispatch", dispatch_body("exec-5"), None),  # held
    (f"{OP}/op-3/dispatch", dispatch_body("exec-6", input={"n": 1}), None),
    (f"{OP}/op-3/dispatch", dispatch_body("exec-7", input={"n": 2}), None),  # input changed
    ("/v1/hooks/n8n/error", {"execution": {"id": "exec-6"}, "workflow": {"id": "wf"}}, None),
    # Released by the execution that dispatched it, the stored go of its key dropped with it:
    # the same dispatch again is answered afresh (attempt 2), not replayed.
    (f"{OP}/op-5/dispatch", dispatch_body("exec-9"), "key-5"),
    (f"{OP}/op-5/release", {"execution_id": "exec-1", "run_index": 0}, None),  # not its: 409
    (
        f"{OP}/op-5/release",
        {"execution_id": "exec-9", "run_index": 0, "dispatch_key": "key-5"},
        None,
    ),
    (f"{OP}/op-5/dispatch", dispatch_body("exec-9"), "key-5"),
    # Refused twice over: by the services (input and its hash both given) and for its key; the
    # services' refusal comes first, whichever process builds the unit.
    (f"{OP}/op-4/dispatch", {**dispatch_body("exec-8", input={"n": 3}), "input_hash": HASH}, "a b"),
]


def _app(ledger: Ledger, *, writer_process: bool) -> Any:
    config = receiver_config()
    return create_app(
        ledger, config=config, secret=SECRET, token_ttl=0.0, writer_process=writer_process
    )


@pytest.fixture
def wall_ledger(store: Store) -> Ledger:
    """The services on the wall clock: the writer process keeps its own."""
    return Ledger(store)


@pytest.fixture
def lane(wall_ledger: Ledger) -> Iterator[Api]:
    token = make_token(wall_ledger, "write")
    with running(_app(wall_ledger, writer_process=True), wall_ledger, {"write": token}) as api:
        yield api


def _play(api: Api) -> list[tuple[int, Any, str | None]]:
    answers = []
    for path, body, key in SCRIPT:
        headers = {"Idempotency-Key": key} if key else {}
        got = api.post(path, body, headers=headers)
        answers.append((got.status_code, got.json(), got.headers.get("idempotent-replayed")))
    return answers


WEB = {"fastapi", "starlette", "uvicorn", "httptools", "uvloop"}


def test_the_writer_process_imports_no_web_framework(
    wall_ledger: Ledger, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every module the child imports, to its last call (each kind of call, answered), as
    Python's own import log (``PYTHONPROFILEIMPORTTIME``) names them."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # read by the child as it starts
    token = make_token(wall_ledger, "write")
    with running(_app(wall_ledger, writer_process=True), wall_ledger, {"write": token}) as api:
        answers = _play(api)
    assert {status for status, _, _ in answers} == {200, 404, 409, 422}
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in capfd.readouterr().err.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "flowledger.receiver.engine.writer_child" in imported  # the log is the child's
    assert "flowledger.services.ledger" in imported
    assert {name for name in imported if name.partition(".")[0] in WEB} == set()


def test_the_writer_process_answers_every_call_as_the_writer_thread_does(
    lane: Api, tmp_path: Path
) -> None:
    store = new_ledger(tmp_path / "thread.db")
    try:
        ledger = Ledger(store)
        tokens = {"write": make_token(ledger, "write")}
        with running(_app(ledger, writer_process=False), ledger, tokens) as threaded:
            expected = _play(threaded)
    finally:
        store.dispose()
    got = _play(lane)
    assert got == expected
    statuses = {status for status, _, _ in got}
    assert statuses == {200, 404, 409, 422}, "the script should reach every kind of answer"
    assert any(replayed == "true" for _, _, replayed in got)


def test_a_signed_call_is_accepted_once_and_a_new_signing_secret_is_redacted(
    lane: Api, wall_ledger: Ledger, store: Store
) -> None:
    # A token made while the receiver runs: its signing secret reaches the writer process
    # before the first call signed with it.
    made = create_token(wall_ledger, "late", "write", signing=True, server_secret=SECRET)
    assert made.signing_secret is not None
    leaked = made.signing_secret
    key = bytes.fromhex(leaked)
    path = f"{OP}/op-9/dispatch"
    body = json.dumps(dispatch_body("exec-9")).encode()
    headers = {
        "Authorization": f"Bearer {made.token}",
        "X-Flowledger-Signature": signature(key, path, body),
        "Content-Type": "application/json",
    }
    first = lane.post(path, token=None, headers=headers, content=body)
    assert first.status_code == 200, first.text
    again = lane.post(path, token=None, headers=headers, content=body)
    assert again.status_code == 401
    assert again.json()["error"]["code"] == "replayed_signature"

    confirm = json.dumps({"receipt": f"sent with {leaked}"}).encode()
    confirm_path = f"{OP}/op-9/confirm"
    headers["X-Flowledger-Signature"] = signature(key, confirm_path, confirm)
    stored = lane.post(confirm_path, token=None, headers=headers, content=confirm)
    assert stored.status_code == 200, stored.text
    assert leaked not in stored.text
    with store.reader.connect() as conn:
        ops = table(Operation)
        receipt = conn.execute(
            sa.select(ops.c.receipt).where(ops.c.operation_id == "op-9")
        ).scalar_one()
    assert leaked not in receipt


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_writer_process_batches_and_decisions_are_counted_by_the_receiver(
    lane: Api, wall_ledger: Ledger
) -> None:
    batches = _sample("flowledger_commit_batch_units_count")
    go = _sample("flowledger_dispatch_decisions_total", decision="go", reason="")
    trips = _sample("flowledger_db_round_trips_total")
    for i in range(3):
        assert lane.post(f"{OP}/m-{i}/dispatch", dispatch_body(f"exec-{i}")).status_code == 200
    refused = {**dispatch_body("exec-r", input={"n": 1}), "input_hash": HASH}
    assert lane.post(f"{OP}/m-r/dispatch", refused).status_code == 422  # never in a commit
    assert _sample("flowledger_commit_batch_units_count") == batches + 3
    assert _sample("flowledger_dispatch_decisions_total", decision="go", reason="") == go + 3
    # The writer process's round trips reach the receiver's metrics: on SQLite one a commit
    # (the commit itself), on PostgreSQL the batch's pipeline syncs and its commit.
    waited = _sample("flowledger_db_round_trips_total") - trips
    if wall_ledger.store.engine.dialect.name == "sqlite":
        assert waited == 3
    else:
        assert 3 <= waited <= 3 * 4


def test_a_ledger_with_its_own_clock_cannot_have_a_writer_process(store: Store) -> None:
    ledger = Ledger(store, clock=FakeClock())
    with (
        pytest.raises(ValueError, match="clock"),
        running(_app(ledger, writer_process=True), ledger, {}),
    ):
        pass


def test_frames_split_anywhere_are_read_whole() -> None:
    messages = [("write", [(1, "a" * 300)]), ("secrets", ["s"]), ("done", [], 0, 0.0, 0)]
    stream = b"".join(pack(m) for m in messages)
    for cut in range(1, len(stream)):
        frames = Frames()
        got = [*frames.feed(stream[:cut]), *frames.feed(stream[cut:])]
        assert got == messages
    one_by_one = Frames()
    assert [m for byte in stream for m in one_by_one.feed(bytes([byte]))] == messages
    assert pickle.loads(pack(messages[0])[4:]) == messages[0]


def test_what_crosses_to_the_writer_process_comes_back_the_same() -> None:
    """A call's body, the call and its answer are pickled as their values: what arrives is
    equal to what was sent, with the fields the client gave (``"input": null`` is no input)."""
    bodies = [
        DispatchCreate.model_validate(
            {**dispatch_body(), "approval": {"version": "a1", "expires_at": "2030-01-01T00:00:00Z"}}
        ),
        DispatchCreate.model_validate(
            {**dispatch_body(), "input": None, "input_hash": "sha256:" + "a" * 64}
        ),
    ]
    for body in bodies:
        call = CallRequest("dispatch", "op-1", body, "token:t", 7, "k", "f", 60.0, None, True)
        answer = Answer("op-1", "dispatching", "go", 1, None, None, [3])
        reply = Reply(200, b"{}", answer, replayed=True, headers={"Allow": "POST"})
        (kind, [(seq, got)]), (_, [(_, back)]) = Frames().feed(
            pack(("write", [(1, call)])) + pack(("done", [(1, reply)]))
        )
        assert (kind, seq, got, back) == ("write", 1, call, reply)
        assert got.body.model_fields_set == body.model_fields_set
        assert got.body.has_input == body.has_input
        assert got.body.to_input() == body.to_input()
        assert back.value.hold_ids == [3]


class _Private(Accepts):
    x: int
    _seen: str = PrivateAttr(default="")


class _Extra(Accepts):
    model_config = ConfigDict(extra="allow")
    x: int


class _Unset(Accepts):
    x: int
    _seen: str = PrivateAttr()


def test_a_body_with_extra_or_private_attributes_is_pickled_whole() -> None:
    private = _Private(x=1)
    private._seen = "yes"
    back = pickle.loads(pickle.dumps(private))
    assert back == private and back._seen == "yes"
    extra = pickle.loads(pickle.dumps(_Extra.model_validate({"x": 1, "y": 2})))
    assert extra.model_extra == {"y": 2}
    none = pickle.loads(pickle.dumps(_Extra(x=1)))  # extra allowed, none given: still a dict
    none.z = 3
    assert none.model_extra == {"z": 3}
    unset = _Unset(x=1)  # a private attribute without a default: an empty dict, kept so
    assert pickle.loads(pickle.dumps(unset)) == unset


def test_a_writer_process_that_cannot_open_the_ledger_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    store = new_ledger(path)
    try:
        ledger = Ledger(store)
        path.unlink()  # the receiver opened it; its writer process will find nothing
        app = _app(ledger, writer_process=True)
        cannot = pytest.raises(LedgerError, match="the writer process cannot open the ledger")
        with cannot, running(app, ledger, {}):
            pass
    finally:
        store.dispose()


def test_a_writer_process_refuses_a_schema_migrated_since_the_receiver_opened_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    store = new_ledger(path)
    try:
        ledger = Ledger(store)
        with store.engine.begin() as conn:  # a newer flowledger migrated it meanwhile
            conn.exec_driver_sql("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
        app = _app(ledger, writer_process=True)
        refused = f"{path} has schema version 99, newer than this flowledger knows"
        cannot = pytest.raises(
            LedgerError, match=f"^the writer process cannot open the ledger: {refused}"
        )
        with cannot, running(app, ledger, {}):
            pass
    finally:
        store.dispose()


# A receiver that opened its ledger before a newer flowledger migrated it, then serves: its
# writer process finds the newer schema. In a process of its own: serving sets up logging.
_SERVE_MIGRATED = """
import sys
from flowledger.receiver.app import create_app
from flowledger.receiver.server import listen, serve_app
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import LedgerError, open_store

store = open_store(sys.argv[1])
ledger = Ledger(store)
with store.engine.begin() as conn:
    conn.exec_driver_sql("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
try:
    serve_app(create_app(ledger, writer_process=True), listen("127.0.0.1", 0))
except LedgerError as exc:
    print(f"refused: {exc}")
"""


def test_serving_stops_in_one_line_when_the_writer_process_refuses_the_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    new_ledger(path).dispose()
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_MIGRATED, str(path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    refused = f"{path} has schema version 99, newer than this flowledger knows"
    assert done.stdout.startswith(f"refused: the writer process cannot open the ledger: {refused}")
    assert "Traceback" not in done.stderr, done.stderr  # not Starlette's traceback of its start


class _Unpicklable:
    def __reduce__(self) -> Any:
        raise TypeError("cannot pickle this body")


def test_a_call_that_cannot_be_handed_over_is_answered_alone(wall_ledger: Ledger) -> None:
    """Its turn's other calls are still written; it gets a 503 rather than waiting forever."""
    app = _app(wall_ledger, writer_process=True)
    body = DispatchCreate.model_validate(dispatch_body("exec-p"))
    good = CallRequest("dispatch", "op-p", body, "t", 1, None, "", 60.0, None, True)
    bad = good._replace(operation_id="op-q", body=_Unpicklable())
    with running(app, wall_ledger, {}) as api:
        writer = app.state.receiver.engine.writer

        async def one_turn() -> list[Any]:
            return list(await asyncio.gather(writer.submit(good), writer.submit(bad)))

        written, refused = api.portal.call(one_turn)
    assert written.status == 200 and json.loads(written.body)["decision"] == "go"
    assert refused.status == 503
    assert json.loads(refused.body)["error"]["code"] == "unavailable"
