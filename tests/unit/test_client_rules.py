"""The client's pure rules give what the ledger and the n8n node give: the same canonical JSON
and input hash (bare and keyed), the same signatures (the node's fixed vectors), and the same
refusals of operation ids, before any call."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowledger.client import rules
from flowledger.domain import hashing, limits
from tests.support import receiver
from tests.unit.test_hashing_vectors import BARE_HEX, CANONICAL, INPUT, KEYED_HEX, SECRET

NODE_SECRET = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def test_the_client_hashes_the_fixed_vector_as_the_ledger_does() -> None:
    assert rules.canonical_json(INPUT) == CANONICAL
    assert rules.input_hash(INPUT) == f"sha256:{BARE_HEX}"
    assert rules.input_hash(INPUT, SECRET) == f"hmac-sha256:{KEYED_HEX}"


@given(json_values)
def test_the_client_canonical_form_is_byte_identical_to_the_ledgers(value: Any) -> None:
    assert rules.canonical_json(value) == hashing.canonical_json(value)
    assert rules.input_hash(value, SECRET) == hashing.input_hash(value, SECRET)


def test_an_input_json_cannot_carry_is_refused() -> None:
    with pytest.raises(ValueError):
        rules.input_hash({"amount": float("nan")})


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        (
            "POST",
            "/v1/operations/invoice%3AINV-42%3Asend/dispatch?x=1",
            b'{"processing_version":"v1"}',
            "t=1764590400,v2=3a4bc841a91ed71de00b19063a05d6fdda2f5d6ea0451744d02c21f01fe16f50",
        ),
        (
            "get",
            "/v1/token",
            b"",
            "t=1764590400,v2=a720c3d1b4d9a565510bc4566e22d7e453737e16e886e8c517e4738ecfc99489",
        ),
    ],
)
def test_the_signature_matches_the_n8n_nodes_fixed_vectors(
    method: str, path: str, body: bytes, expected: str
) -> None:
    key = rules.signing_key(NODE_SECRET)
    assert rules.signature(key, 1764590400, method, path, body) == expected
    assert receiver.signature(key, path, body, 1764590400, method=method.upper()) == expected


@pytest.mark.parametrize("secret", ["", "abc", "g" * 64, NODE_SECRET + "00"])
def test_a_signing_secret_that_is_not_64_hex_characters_is_refused(secret: str) -> None:
    with pytest.raises(ValueError, match="64 hex"):
        rules.signing_key(secret)


IDS = [
    "invoice:INV-42:send",
    "a/b:c",
    "invoice::send",
    ":send",
    "invoice: :send",
    "invoice:undefined:send",
    "invoice:null:send",
    "invoice:NaN:send",
    "invoice:[object Object]:send",
    "invoice:INV-42\u200b:send",
    "invoice:\u2066x\u2069",
    "tab\there",
    "x" * 200,
    "x" * 201,
    "",
]


@pytest.mark.parametrize("operation_id", IDS)
def test_the_client_refuses_the_operation_ids_the_ledger_refuses(operation_id: str) -> None:
    refused_here = rules.operation_id_problem(operation_id) is not None
    refused_there = limits.operation_id_problem(operation_id) is not None
    assert refused_here == refused_there


@pytest.mark.parametrize("operation_id", ["invoice:None:send", "None"])
def test_the_client_also_refuses_what_python_makes_of_a_missing_value(operation_id: str) -> None:
    assert "missing" in (rules.operation_id_problem(operation_id) or "")


@pytest.mark.parametrize("receipt", [None, "", "  ", "None", "undefined", "x" * 1001, True, 1.5])
def test_a_receipt_that_names_nothing_is_refused(receipt: object) -> None:
    assert rules.receipt_problem(receipt) is not None


@pytest.mark.parametrize("receipt", ["msg-6017", 6017, "x" * 1000])
def test_a_receipt_that_names_the_write_is_taken(receipt: object) -> None:
    assert rules.receipt_problem(receipt) is None


KEY_PARTS: dict[str, Any] = {
    "workflow_id": "wf",
    "execution_id": "run-1",
    "step": "send",
    "run_index": 0,
    "operation_id": "invoice:INV-42:send",
}


def test_the_same_call_of_the_same_execution_has_the_same_key() -> None:
    key = rules.idempotency_key("dispatch", **KEY_PARTS)
    assert key == rules.idempotency_key("dispatch", **dict(KEY_PARTS))
    assert key.startswith("py-dispatch-") and len(key) == len("py-dispatch-") + 48


@pytest.mark.parametrize(
    "change",
    [
        {"workflow_id": "wf2"},
        {"execution_id": "run-2"},
        {"step": "other"},
        {"run_index": 1},
        {"operation_id": "invoice:INV-43:send"},
        {"workflow_id": "wfr", "execution_id": "un-1"},
    ],
)
def test_any_other_call_has_another_key(change: dict[str, Any]) -> None:
    assert rules.idempotency_key("dispatch", **{**KEY_PARTS, **change}) != rules.idempotency_key(
        "dispatch", **KEY_PARTS
    )
    assert rules.idempotency_key("confirm", **KEY_PARTS) != rules.idempotency_key(
        "dispatch", **KEY_PARTS
    )
