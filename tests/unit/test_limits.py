"""What the ledger accepts, at each edge: the exact phrase for each problem, ``None`` when
there is none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowledger.domain.display import has_control_or_bidi
from flowledger.domain.limits import (
    id_problem,
    is_valid_hash,
    operation_id_problem,
    printable_problem,
    receipt_problem,
    run_index_problem,
    storable_problem,
    text_problem,
)

HEX = "0123456789abcdef" * 4
NUL = "must not contain NUL characters"
UNICODE = "must be valid Unicode text"
CONTROL = "must not contain control or bidi characters"
LONE_SURROGATE = "a\ud800b"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        (f"sha256:{HEX}", True),
        (f"hmac-sha256:{HEX}", True),
        (f"sha256:{HEX[:-1]}", False),
        (f"sha256:{HEX}0", False),
        (f"sha256:{HEX.upper()}", False),
        (f"md5:{HEX}", False),
        (f"x-sha256:{HEX}", False),
        (f"sha256:{HEX[:-1]}g", False),
        (HEX, False),
        ("", False),
        (f"sha256:{HEX}\n", False),
    ],
    ids=[
        "sha256",
        "hmac",
        "short",
        "long",
        "upper",
        "md5",
        "prefixed",
        "not-hex",
        "bare",
        "empty",
        "trailing-newline",
    ],
)
def test_an_input_hash_is_a_named_algorithm_and_64_lowercase_hex_digits(
    value: str, valid: bool
) -> None:
    assert is_valid_hash(value) is valid


@pytest.mark.parametrize(
    ("value", "problem"),
    [("plain text é ✓ \n\t", None), ("a\x00b", NUL), (LONE_SURROGATE, UNICODE)],
    ids=["text", "nul", "surrogate"],
)
def test_storable_text_has_no_nul_and_no_lone_surrogate(value: str, problem: str | None) -> None:
    assert storable_problem(value) == problem


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (" ~é", None),
        ("a\x1fb", CONTROL),
        ("a\x7fb", CONTROL),
        ("a\nb", CONTROL),
        ("\x00", CONTROL),
        ("\x9b", CONTROL),
        ("a\u202eb", CONTROL),
        ("a\u2066b", CONTROL),
        ("\xa0é\u200b", None),
        (LONE_SURROGATE, UNICODE),
    ],
    ids=[
        "space-to-tilde",
        "unit-separator",
        "delete",
        "newline",
        "nul",
        "c1",
        "right-to-left-override",
        "isolate",
        "no-break-space",
        "surrogate",
    ],
)
def test_printable_text_has_no_control_or_bidi_character(value: str, problem: str | None) -> None:
    assert printable_problem(value) == problem


ID_LENGTH = "must be 1 to 200 printable characters"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("x", None),
        ("x" * 200, None),
        ("", ID_LENGTH),
        ("x" * 201, ID_LENGTH),
        (42, ID_LENGTH),
        (None, ID_LENGTH),
        ("op\t1", ID_LENGTH),
        ("op\x7f", ID_LENGTH),
        ("op\x00", ID_LENGTH),
        ("op\u202e", ID_LENGTH),
        ("op\x1b[2J", ID_LENGTH),
        (LONE_SURROGATE, ID_LENGTH),
    ],
    ids=[
        "one",
        "longest",
        "empty",
        "too-long",
        "number",
        "none",
        "control",
        "delete",
        "nul",
        "bidi-override",
        "escape",
        "surrogate",
    ],
)
def test_an_id_is_1_to_200_printable_characters(value: object, problem: str | None) -> None:
    assert id_problem(value) == problem


EMPTY_SEGMENT = "must not have an empty segment (a ':' at either end, or '::')"


def coerced(segment: str) -> str:
    return (
        f"must not have the segment {segment!r}, what a missing value becomes as text: "
        "the field it is built from is missing"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("invoice:INV-42:send", None),
        ("a", None),
        ("x" * 200, None),
        ("undefinedX:nullable:NaNa:[object Object]s", None),
        ("invoice: INV-42 :send", None),
        ("invoice:undefined:send", coerced("undefined")),
        ("invoice:null:send", coerced("null")),
        ("invoice:NaN:send", coerced("NaN")),
        ("invoice:[object Object]:send", coerced("[object Object]")),
        ("undefined", coerced("undefined")),
        ("null:INV-42", coerced("null")),
        ("invoice:NaN", coerced("NaN")),
        ("invoice: undefined :send", coerced("undefined")),
        ("invoice:Undefined:send", None),
        ("invoice:None:send", None),
        ("a::b", EMPTY_SEGMENT),
        (":a", EMPTY_SEGMENT),
        ("a:", EMPTY_SEGMENT),
        (":", EMPTY_SEGMENT),
        ("a: :b", EMPTY_SEGMENT),
        (" ", EMPTY_SEGMENT),
        ("a::undefined", EMPTY_SEGMENT),
        ("", ID_LENGTH),
        ("x" * 201, ID_LENGTH),
        (None, ID_LENGTH),
        ("a:\x1b:b", ID_LENGTH),
    ],
    ids=[
        "invoice",
        "one-segment",
        "longest",
        "words-inside-segments",
        "padded-segment",
        "undefined",
        "null",
        "nan",
        "object",
        "only-undefined",
        "first",
        "last",
        "padded-undefined",
        "capitalised",
        "python-none",
        "empty-middle",
        "empty-first",
        "empty-last",
        "only-colon",
        "blank-middle",
        "blank",
        "first-problem-found",
        "empty",
        "too-long",
        "not-text",
        "control",
    ],
)
def test_an_operation_id_has_no_empty_or_coerced_segment(
    value: object, problem: str | None
) -> None:
    assert operation_id_problem(value) == problem


@pytest.mark.parametrize(
    "hidden",
    ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\xad", "\ufe0f", "\U000e0041", "\u3164"],
    ids=["zwsp", "zwnj", "zwj", "word-joiner", "bom", "soft-hyphen", "vs16", "tag", "filler"],
)
def test_an_operation_id_to_write_has_no_invisible_character_but_a_stored_one_reads(
    hidden: str,
) -> None:
    value = f"invoice:INV-42{hidden}:send"
    assert "invisible characters" in (operation_id_problem(value) or "")
    assert id_problem(value) is None  # reads take any stored id
    assert operation_id_problem("facture:été:日本") is None


RECEIPT_LENGTH = "must be 1 to 1000 characters"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("R-1", None),
        (" R-1\n", None),
        ("R" * 1000, None),
        ("", RECEIPT_LENGTH),
        (" \t ", RECEIPT_LENGTH),
        ("R" * 1001, RECEIPT_LENGTH),
        (1, RECEIPT_LENGTH),
        ("R\x00", NUL),
    ],
    ids=["plain", "padded", "longest", "empty", "blank", "too-long", "number", "nul"],
)
def test_a_receipt_is_1_to_1000_characters_not_all_blank(
    value: object, problem: str | None
) -> None:
    assert receipt_problem(value) == problem


@pytest.mark.parametrize(
    ("value", "empty", "problem"),
    [
        ("", True, None),
        ("abcde", True, None),
        ("abcdef", True, "must be at most 5 characters"),
        (None, True, "must be at most 5 characters"),
        ("", False, "must be 1 to 5 characters"),
        ("a", False, None),
        ("abcde", False, None),
        ("abcdef", False, "must be 1 to 5 characters"),
        ("a\nb", True, None),
        ("a\x00", True, NUL),
        (LONE_SURROGATE, False, UNICODE),
    ],
    ids=[
        "empty-allowed",
        "longest",
        "too-long",
        "none",
        "empty-refused",
        "one",
        "longest-non-empty",
        "too-long-non-empty",
        "newline",
        "nul",
        "surrogate",
    ],
)
def test_free_text_is_limited_in_length_and_may_be_required(
    value: object, empty: bool, problem: str | None
) -> None:
    assert text_problem(value, 5, empty=empty) == problem


def test_free_text_may_be_empty_unless_told_otherwise() -> None:
    assert text_problem("", 5) is None


RUN_INDEX = "must be between 0 and 2^31-1"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0, None),
        (2**31 - 1, None),
        (-1, RUN_INDEX),
        (2**31, RUN_INDEX),
        (True, RUN_INDEX),
        (False, RUN_INDEX),
        ("1", RUN_INDEX),
        (1.0, RUN_INDEX),
        (None, RUN_INDEX),
    ],
    ids=["zero", "largest", "negative", "too-large", "true", "false", "text", "float", "none"],
)
def test_a_run_index_is_a_32_bit_non_negative_integer(value: object, problem: str | None) -> None:
    assert run_index_problem(value) == problem


@given(
    st.text(st.characters(codec=None, exclude_categories=()))
    | st.text(st.characters(max_codepoint=0x7F))
)
def test_the_printable_ascii_shortcut_answers_as_the_checks_one_by_one(value: str) -> None:
    one_by_one = CONTROL if has_control_or_bidi(value) else storable_problem(value)
    assert printable_problem(value) == one_by_one
