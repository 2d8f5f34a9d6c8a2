"""Invisible characters in operation ids are refused at the door (``invoice:INV-42\\u200b:send``
looks like ``invoice:INV-42:send`` and would be another operation, written again); one an older
ledger stored is still read. Every JSON answer is ASCII: what a stored value holds (controls,
C1, DEL, bidi, invisible characters) comes back as JSON escapes, the same values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from flowledger.domain import limits
from tests.support.builders import dispatch_body, req
from tests.support.database import snapshot
from tests.support.receiver import Api

HIDDEN = ["\u200b", "\u200d", "\u2060", "\ufeff", "\xad", "\ufe0f", "\U000e0041", "\U000e007f"]
# What a target may answer: C1 (a CSI and a NEL), DEL, a bidi override and invisible ones.
RECEIPT = "R-7\x9b2J\x85\x7f\u202e\u200b\U000e0041"
RAW = ("\x9b", "\x85", "\x7f", "\u202e", "\u200b", "\U000e0041")


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only: the refusal is made before any database work, the answers' encoding is
    the app's."""
    return str(tmp_path / "ledger.db")


@pytest.mark.parametrize("hidden", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
@pytest.mark.parametrize("call", ["dispatch", "prepare"])
def test_an_operation_id_with_an_invisible_character_is_422_invalid_id(
    api: Api, call: str, hidden: str
) -> None:
    before = snapshot(api.ledger.store)
    path = f"/v1/operations/{quote(f'invoice:INV-42{hidden}:send')}/{call}"
    answer = api.post(path, dispatch_body() if call == "dispatch" else {"processing_version": "v1",
                      "input": {"a": 1}})  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_id"
    assert answer.json()["error"]["field"] == "operation_id"
    assert snapshot(api.ledger.store) == before


def test_the_openapi_states_the_written_id_refuses_invisible_characters(api: Api) -> None:
    spec = api.get("/openapi.json", token=None).json()
    parameter = spec["paths"]["/v1/operations/{operation_id}/dispatch"]["post"]["parameters"][0]
    pattern = parameter["schema"]["pattern"]
    assert re.fullmatch(pattern, "invoice:INV-42:send")
    assert not any(re.fullmatch(pattern, f"a{c}b") for c in HIDDEN)


def test_json_answers_are_ascii_and_carry_stored_text_exactly(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = "invoice:INV-42\u200b:send"
    with monkeypatch.context() as m:  # as an older ledger took it
        m.setattr(limits, "operation_id_problem", lambda value: None)
        api.ledger.dispatch(stored, req()).run("workflow")
        api.ledger.confirm(stored, RECEIPT, execution_id="exec-1").run("workflow")
        api.ledger.confirm(stored, "R-8\u2066", execution_id="exec-1").run("workflow")  # a conflict
    hold = api.get("/v1/holds").json()["items"][0]["id"]
    answers = [
        api.get(f"/v1/operations/{quote(stored)}"),
        api.get("/v1/operations?hold=open"),
        api.get("/v1/holds"),
        api.post(f"/v1/holds/{hold}/note", {"note": "seen \x85"}, token="operator"),
    ]
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.content.isascii(), answer.content
        assert not any(c in answer.text for c in RAW)
    one = answers[0].json()["operation"]
    assert (one["operation_id"], one["receipt"]) == (stored, RECEIPT)
    assert json.loads(answers[2].content)["items"][0]["operation_id"] == stored
