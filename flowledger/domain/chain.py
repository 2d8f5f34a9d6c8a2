"""The event chain's form: which fields of an event its hash covers, written the same way by
the writer (which seals events as it appends them) and the verifier (which recomputes every
hash). Each hash is :func:`flowledger.domain.hashing.seal` over the previous hash and this form."""

from __future__ import annotations

from datetime import UTC, datetime
from json.encoder import encode_basestring as _quote
from typing import Any


def sealed_prefix(
    at: datetime,
    actor: str,
    kind: str,
    operation_id: str | None,
    hold_id: int | None,
    data_json: str,
    *,
    at_text: str | None = None,
) -> bytes:
    """``canonical_json(event_body(...))`` up to the sequence number, its last field: all of
    the form that does not depend on the event's place in the chain, built around
    ``data_json`` (the data's canonical JSON, which the writer stores anyway) so the data is
    encoded once. The sealed form is this followed by :func:`sealed_tail`; the PostgreSQL
    writer sends this and the database appends the tail once it knows the place.

    ``at_text`` is ``at`` as the form writes it (:func:`event_time`), when the caller has it:
    the events of one transaction share their time, and writing it is most of this
    function's cost (``bench/README.md``, "Domain")."""
    stamp = event_time(at) if at_text is None else at_text
    return (
        f'{{"actor":{_js(actor)},"at":"{stamp}",'
        f'"data":{data_json},"hold_id":{_js(hold_id)},"kind":{_js(kind)},'
        f'"operation_id":{_js(operation_id)},"seq":'
    ).encode()


def event_time(at: datetime) -> str:
    """An event's time as its sealed form writes it."""
    return at.isoformat(timespec="microseconds")


def sealed_tail(seq: int) -> bytes:
    """The end of the sealed form after :func:`sealed_prefix`: the sequence number."""
    return f"{seq}}}".encode()


def _js(value: str | int | None) -> str:
    """One scalar as ``canonical_json`` writes it (no ASCII escaping)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return _quote(value)
    return str(int(value))


def event_body(
    seq: int,
    at: datetime,
    actor: str,
    kind: str,
    operation_id: str | None,
    hold_id: int | None,
    data: dict[str, Any],
) -> dict[str, Any]:
    """The fields the hash covers, in the form both writer and verifier build."""
    return {
        "seq": seq,
        "at": at.isoformat(timespec="microseconds"),
        "actor": actor,
        "kind": kind,
        "operation_id": operation_id,
        "hold_id": hold_id,
        "data": data,
    }


def data_time(value: datetime | None) -> str | None:
    """A time in an event's data (a deadline the row was written with): ISO 8601 in UTC, to the
    microsecond both databases keep, so a replay reads back the stored value exactly."""
    return None if value is None else value.astimezone(UTC).isoformat()


def time_of_data(value: str | None) -> datetime | None:
    """The time :func:`data_time` wrote (``None`` stays ``None``)."""
    return None if value is None else datetime.fromisoformat(value)


# Twelve hex digits are what the UI shows of a head: 48 bits, so two events of one ledger
# sharing them is a chance of about n²/2⁴⁹ (one in 5,600 at 10 million events).
HEAD_PREFIX_MIN = 12
_HEX = frozenset("0123456789abcdef")


def head_prefix(value: str) -> str:
    """A head hash as a person gives it to ``verify --expect-head``: the whole hash or its
    first :data:`HEAD_PREFIX_MIN` or more hex digits, the ellipsis the UI shows after a short
    hash allowed. Lower-cased; a :class:`ValueError` says what is wrong with it."""
    digits = value.strip().removesuffix("…").removesuffix("...").lower()
    if not digits or not set(digits) <= _HEX:
        raise ValueError(f"{value!r} is not a head hash: give its hex digits (0-9, a-f)")
    if len(digits) > 64:
        raise ValueError(f"{value!r} is longer than a head hash (64 hex digits)")
    if len(digits) < HEAD_PREFIX_MIN:
        raise ValueError(
            f"{value!r} is too short: give at least the first {HEAD_PREFIX_MIN} hex digits "
            "of the head hash (what the UI's Events tab shows) or all 64"
        )
    return digits
