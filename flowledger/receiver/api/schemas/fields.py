"""The field types every family of models shares (ids, text, receipts, times), each with
the check that decides and the pattern the OpenAPI states for it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)

from flowledger.domain import limits
from flowledger.domain.display import BIDI, CONTROLS, IGNORABLE
from flowledger.domain.times import for_machines

MAX_INPUT_DEPTH = 64


def _escaped(chars: str) -> str:
    """A regex character class body (as :mod:`flowledger.domain.display` writes it) with every
    character of the Basic Multilingual Plane as a ``\\uXXXX`` escape, which JSON Schema's and
    Python's regexes both read; one beyond it (a tag character) as itself, since no escape
    for it reads the same in both."""
    return "".join(c if c == "-" or ord(c) > 0xFFFF else f"\\u{ord(c):04x}" for c in chars)


def _storable(value: str) -> str:
    problem = limits.storable_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _printable(value: str) -> str:
    problem = limits.printable_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _operation_id(value: str) -> str:
    problem = limits.operation_id_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _receipt(value: str) -> str:
    problem = limits.receipt_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of range") from None


def _written(value: Any) -> Any:
    return for_machines(value) if isinstance(value, datetime) else value


# A time in an answer: ISO 8601 in UTC as every JSON of the ledger writes it
# (``2026-11-02T14:20:00+00:00``, :func:`flowledger.domain.times.for_machines`), not pydantic's
# ``Z``; a date-time in the OpenAPI as before.
Time = Annotated[
    datetime,
    PlainSerializer(for_machines, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}, mode="serialization"),
]
# A value of a row shown as it is read (an attempt, a receipt, a hold): its times as Time.
RowValue = Annotated[Any, PlainSerializer(_written, when_used="json")]


def _encodable(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None


def json_depth(value: Any) -> Any:
    """Refuse inputs nested deeper than :data:`MAX_INPUT_DEPTH` (hashing recurses), or holding
    a lone surrogate (no UTF-8 for it to hash). Any other text is fine, NUL included: the input
    is hashed and discarded, never stored."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_INPUT_DEPTH:
            raise ValueError(f"is nested deeper than {MAX_INPUT_DEPTH} levels")
        if isinstance(item, dict):
            for k, v in item.items():
                _encodable(k)
                stack.append((v, depth + 1))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            _encodable(item)
    return value


# What the validators check, stated in the OpenAPI schema as patterns (the validators stay
# the ones that decide, with their clearer messages).
ID_PATTERN = f"^[^{_escaped(CONTROLS + BIDI)}]+$"
# An operation id to create or change: no invisible character either.
WRITTEN_ID_PATTERN = f"^[^{_escaped(CONTROLS + BIDI + IGNORABLE)}]+$"
TEXT_PATTERN = "^[^\\u0000]*$"  # no NUL
_COERCED = "|".join(
    v.replace("[", "\\[").replace("]", "\\]") for v in sorted(limits.COERCED_RECEIPTS)
)
RECEIPT_PATTERN = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"  # not blank, no NUL
COERCED_PATTERN = f"^\\s*(?:{_COERCED})\\s*$"  # what a receipt must not be
# What an operation id to write must not hold: a blank segment, or one a missing value became.
BAD_SEGMENT_PATTERN = f"(?:^|:)\\s*(?:{_COERCED})?\\s*(?::|$)"

Id = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_ID_LENGTH),
    AfterValidator(_printable),
    Field(json_schema_extra={"pattern": ID_PATTERN}),
]
# The id of an operation to create or change (reads take any id that may be stored).
WrittenOperationId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_ID_LENGTH),
    AfterValidator(_printable),
    AfterValidator(_operation_id),
    Field(
        json_schema_extra={"pattern": WRITTEN_ID_PATTERN, "not": {"pattern": BAD_SEGMENT_PATTERN}}
    ),
]
Text = Annotated[str, AfterValidator(_storable), Field(json_schema_extra={"pattern": TEXT_PATTERN})]
Receipt = Annotated[
    str,
    StringConstraints(min_length=1, max_length=limits.MAX_RECEIPT_LENGTH),
    AfterValidator(_receipt),
    Field(json_schema_extra={"pattern": RECEIPT_PATTERN, "not": {"pattern": COERCED_PATTERN}}),
]


def _time_text(value: Any) -> Any:
    """A time is sent as RFC 3339 text, as the schema says; pydantic would also take a number
    of seconds, which no client means."""
    if not isinstance(value, str | datetime):
        raise ValueError("must be an RFC 3339 date-time with an offset")
    return value


When = Annotated[AwareDatetime, BeforeValidator(_time_text), AfterValidator(_utc)]


def _json_integer(value: Any) -> Any:
    """A JSON number, as the OpenAPI's ``integer`` says: not the text ``"0"`` nor JSON's
    ``true`` (pydantic would take them as 0 and 1); ``1250.0`` is one (JSON Schema's integer is
    any number without a fraction)."""
    if isinstance(value, bool | str):
        raise ValueError("must be a whole number, sent as a JSON number")
    return value


RunIndex = Annotated[int, Field(ge=0, le=limits.MAX_RUN_INDEX), BeforeValidator(_json_integer)]
InputHash = Annotated[str, StringConstraints(pattern=limits.HASH_PATTERN)]


def is_idempotency_key(value: str) -> bool:
    """1 to 200 visible ASCII characters: an ``Idempotency-Key`` as the header and a body take
    it."""
    return 1 <= len(value) <= 200 and all(0x21 <= ord(c) <= 0x7E for c in value)


def _key(value: str) -> str:
    if not is_idempotency_key(value):
        raise ValueError("an Idempotency-Key is 1 to 200 visible ASCII characters")
    return value


# An ``Idempotency-Key`` named in a body: as the header takes it, 1 to 200 visible ASCII.
IdempotencyKey = Annotated[
    str,
    AfterValidator(_key),
    Field(json_schema_extra={"pattern": "^[\\x21-\\x7e]{1,200}$"}),
]


class Accepts(BaseModel):
    """What a client may send: an unknown field is an error. Pickled as its class and values
    (every validated body is handed to the writer process so): pydantic's own
    pickling goes through its state dict, which cost a third more (bench/README.md, "Where
    the SQLite receiver stands")."""

    model_config = ConfigDict(extra="forbid")

    def __reduce__(self) -> Any:
        if self.__pydantic_extra__ is not None or self.__pydantic_private__ is not None:
            return super().__reduce__()
        return _validated, (type(self), self.__dict__, self.__pydantic_fields_set__)


def _validated(cls: type[Accepts], values: dict[str, Any], given: set[str]) -> Accepts:
    """A body that was validated already, rebuilt from its values (:meth:`Accepts.__reduce__`),
    as pydantic's ``__setstate__`` rebuilds one with no extra or private attributes (one that
    has either, even empty, is pickled by pydantic's own state, whole)."""
    body = cls.__new__(cls)
    object.__setattr__(body, "__dict__", values)
    object.__setattr__(body, "__pydantic_fields_set__", given)
    object.__setattr__(body, "__pydantic_extra__", None)
    object.__setattr__(body, "__pydantic_private__", None)
    return body
