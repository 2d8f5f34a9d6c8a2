from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowledger.domain.chain import event_body, sealed_prefix, sealed_tail
from flowledger.domain.hashing import canonical_json, chain_hash, input_hash, is_valid_hash


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


_text = st.text(max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)


@given(
    seq=st.integers(min_value=1, max_value=2**62),
    at=st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))])),
    actor=_text,
    kind=_text,
    operation_id=st.none() | _text,
    hold_id=st.none() | st.integers(min_value=1, max_value=2**31),
    data=st.dictionaries(_text, _json, max_size=4),
)
def test_the_writers_sealed_json_is_the_canonical_event(
    seq: int,
    at: datetime,
    actor: str,
    kind: str,
    operation_id: str | None,
    hold_id: int | None,
    data: dict[str, object],
) -> None:
    """The writer builds the sealed bytes around the stored data; ``verify`` rebuilds them
    from the row with ``canonical_json``. They must agree to the byte."""
    body = event_body(seq, at, actor, kind, operation_id, hold_id, data)
    data_json = canonical_json(data).decode()
    form = sealed_prefix(at, actor, kind, operation_id, hold_id, data_json)
    assert form + sealed_tail(seq) == canonical_json(body)


def test_equal_instants_in_two_zones_are_sealed_as_each_is_written() -> None:
    """The writer remembers the times it has formatted: an equal instant written in another
    zone is still its own text, as ``canonical_json`` of the event has it."""
    at = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    for moment in (at, at.astimezone(timezone(timedelta(hours=1))), at):
        body = event_body(1, moment, "a", "k", None, None, {})
        assert sealed_prefix(moment, "a", "k", None, None, "{}") + sealed_tail(1) == (
            canonical_json(body)
        )


@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
))  # fmt: skip
def test_the_canonical_form_is_what_json_dumps_writes_with_the_canonical_options(
    value: object,
) -> None:
    """The encoder made once (:data:`flowledger.domain.hashing._CANONICAL`) writes exactly what
    ``json.dumps`` writes: every chain already stored was sealed over that."""
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert canonical_json(value) == expected.encode("utf-8")
