"""Fixed test vectors for canonical JSON, the input hash (bare and keyed) and the event chain:
each expected value is a literal, and is computed again here with ``hashlib``/``hmac`` so the
literal itself is checked."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from flowledger.domain.hashing import (
    GENESIS_HASH,
    canonical_json,
    chain_hash,
    input_hash,
    seal,
    token_digest,
)

INPUT = {"invoice": "INV-42", "lines": [1, 2.5, None, True], "customer": "Zoë", "amount": 1200}
CANONICAL = b'{"amount":1200,"customer":"Zo\xc3\xab","invoice":"INV-42","lines":[1,2.5,null,true]}'
SECRET = b"ledger-secret"
BARE_HEX = "f1b114396ceec7d0596b8c5a170ff53a9ebb91e9cdeb78af99ced9aa726a5f25"
KEYED_HEX = "3ac35741d5e06765c2827c75c6bda888c5576e7628f47dda270147f11f5ff31a"

EVENT = {"seq": 1, "kind": "dispatched"}
EVENT_JSON = b'{"kind":"dispatched","seq":1}'
FIRST_SEAL = "526687078ee56841217d964ac047c182aa89ee2a30a44ed6f1cc514a693044fe"
SECOND_SEAL = "99a86447f0453bc155f079b21fcdc8a91ccb1030c999d499aeb4f8bc9c154681"


def test_canonical_json_sorts_keys_drops_spaces_and_keeps_text_as_utf8() -> None:
    assert canonical_json(INPUT) == CANONICAL


def test_canonical_json_sorts_nested_keys_by_code_point() -> None:
    assert canonical_json({"b": {"ü": 1, "z": 2}, "a": []}) == b'{"a":[],"b":{"z":2,"\xc3\xbc":1}}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_canonical_json_refuses_numbers_json_cannot_carry(value: float) -> None:
    with pytest.raises(ValueError):
        canonical_json({"amount": value})


def test_the_bare_input_hash_is_sha256_of_the_canonical_json() -> None:
    assert hashlib.sha256(CANONICAL).hexdigest() == BARE_HEX
    assert input_hash(INPUT) == f"sha256:{BARE_HEX}"
    assert input_hash(INPUT, None) == f"sha256:{BARE_HEX}"


def test_the_keyed_input_hash_is_hmac_sha256_of_the_canonical_json_with_the_secret() -> None:
    assert hmac.new(SECRET, CANONICAL, hashlib.sha256).hexdigest() == KEYED_HEX
    assert input_hash(INPUT, SECRET) == f"hmac-sha256:{KEYED_HEX}"


def test_the_chain_starts_from_sixty_four_zeros() -> None:
    assert GENESIS_HASH == "0" * 64


def test_each_seal_covers_the_previous_seal_and_the_canonical_event() -> None:
    assert hashlib.sha256(GENESIS_HASH.encode() + EVENT_JSON).hexdigest() == FIRST_SEAL
    assert hashlib.sha256(FIRST_SEAL.encode() + EVENT_JSON).hexdigest() == SECOND_SEAL
    assert seal(GENESIS_HASH, EVENT_JSON) == FIRST_SEAL
    assert seal(FIRST_SEAL, EVENT_JSON) == SECOND_SEAL


def test_the_chain_hash_is_the_seal_of_the_events_canonical_json() -> None:
    assert chain_hash(GENESIS_HASH, EVENT) == FIRST_SEAL
    assert chain_hash(FIRST_SEAL, EVENT) == SECOND_SEAL


def test_a_token_is_stored_as_the_sha256_of_its_utf8_text() -> None:
    expected = "7ed459ad1f869700d0ce4e0f5bbfefc5fe448be564507c6e46ccabceec33c2ff"
    assert hashlib.sha256("tok-é".encode()).hexdigest() == expected
    assert token_digest("tok-é") == expected
