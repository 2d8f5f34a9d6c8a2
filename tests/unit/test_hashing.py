from __future__ import annotations

import hashlib

import pytest

from ledger.hashing import canonical_json, chain_hash, input_hash, is_valid_hash


def test_canonical_json_sorts_keys_and_drops_spaces() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()


def test_input_hash_is_order_independent_sha256() -> None:
    expected = "sha256:" + hashlib.sha256(b'{"a":1,"b":2}').hexdigest()
    assert input_hash({"b": 2, "a": 1}) == input_hash({"a": 1, "b": 2}) == expected


def test_keyed_hash_differs_by_secret_and_is_marked() -> None:
    one, two = input_hash({"a": 1}, b"s1"), input_hash({"a": 1}, b"s2")
    assert one.startswith("hmac-sha256:") and one != two and is_valid_hash(one)


def test_nan_has_no_canonical_form() -> None:
    with pytest.raises(ValueError):
        input_hash({"x": float("nan")})


@pytest.mark.parametrize("value", ["sha256:abc", "md5:" + "a" * 64, "sha256:" + "A" * 64, ""])
def test_malformed_hashes_are_rejected(value: str) -> None:
    assert not is_valid_hash(value)


def test_chain_hash_depends_on_previous_hash() -> None:
    assert chain_hash("0" * 64, {"a": 1}) != chain_hash("1" * 64, {"a": 1})
