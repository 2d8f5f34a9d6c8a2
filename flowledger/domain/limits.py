"""What the ledger accepts: the limits on ids, texts and numbers, and the input hash's form.

Each limit is written once, here. The API's schemas (:mod:`flowledger.receiver.api.schemas`) declare
them so that the OpenAPI document states them; the writer (:mod:`flowledger.services.values`) checks
them for every other caller (CLI, terminal UI, sync, demo); the tables
(:mod:`flowledger.storage.models`) size their columns by them. The checks return the problem as a
phrase ("must be …") that each side puts in its own error, or ``None``.
"""

from __future__ import annotations

import re

from flowledger.domain.display import has_control_or_bidi, has_ignorable

MAX_ID_LENGTH = 200  # operation, execution, workflow, step, source, version, operator names
MAX_RECEIPT_LENGTH = 1000
MAX_DETAIL_LENGTH = 4000  # a confirm's detail
MAX_INPUT_REF_LENGTH = 1000  # where the input can be found (a URL, a file name)
MAX_ERROR_LENGTH = 2000  # a failure's error text, as stored
MAX_HOLD_DETAIL_LENGTH = 2000  # why a hold was opened, as stored
MAX_NOTE_LENGTH = 4000  # a person's note on a decision
MAX_NEXT_ACTION_LENGTH = 1000
MAX_RUN_INDEX = 2**31 - 1  # n8n's run index is a 32-bit integer

# ``sha256:<hex>`` of the canonical input, or ``hmac-sha256:<hex>`` keyed with the secret.
HASH_PATTERN = r"^(sha256|hmac-sha256):[0-9a-f]{64}$"
_HASH = re.compile(HASH_PATTERN)


def is_valid_hash(value: str) -> bool:
    return bool(_HASH.fullmatch(value))


def storable_problem(value: str) -> str | None:
    """Text both databases can hold: no NUL, no lone surrogate (PostgreSQL and UTF-8 refuse
    them, and a refusal there would be a server error instead of a clear answer)."""
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text"
    return None


def printable_problem(value: str) -> str | None:
    """Storable, and no control (C0, DEL, C1) or bidi override character: an id is shown on
    one line and must read as it is stored. Printable ASCII, the usual id, is all three at
    once: 0.12 us against 0.43 us for the checks one by one (bench/README.md, "Domain")."""
    if value.isascii() and value.isprintable():
        return None
    if has_control_or_bidi(value):
        return "must not contain control or bidi characters"
    return storable_problem(value)


def id_problem(value: object) -> str | None:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_ID_LENGTH
        or printable_problem(value) is not None
    ):
        return f"must be 1 to {MAX_ID_LENGTH} printable characters"
    return None


# What JavaScript makes of a missing or unusable value when a workflow turns it into text
# (``String(undefined)``, ``String(null)``, ``String({})``, ``String(0 / 0)``): a receipt that
# says nothing about the effect. Confirmed with one, the operation would answer ``skip`` with it
# for good, so every caller is refused it, whichever client made it.
COERCED_RECEIPTS = frozenset({"undefined", "null", "[object Object]", "NaN"})


def receipt_problem(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_RECEIPT_LENGTH:
        return f"must be 1 to {MAX_RECEIPT_LENGTH} characters"
    if value.strip() in COERCED_RECEIPTS:
        return (
            f"must be the target's reference for the write, not {value.strip()!r} "
            "(a missing value turned into text)"
        )
    return storable_problem(value)


def operation_id_problem(value: object) -> str | None:
    """An id as :func:`id_problem` takes it, with no invisible character and none of whose
    ``:``-separated segments is blank or one of :data:`COERCED_RECEIPTS`:
    ``invoice:undefined:send`` is what a workflow builds from a missing field, and every later
    body missing it would name the same operation; ``invoice:INV-42\\u200b:send`` looks like
    ``invoice:INV-42:send`` and is another operation, whose dispatch would write again.
    Checked where an operation is created or changed; reads take any stored id."""
    problem = id_problem(value)
    if problem is not None:
        return problem
    text = str(value)
    if not text.isascii() and has_ignorable(text):
        return (
            "must not contain invisible characters (zero-width spaces and joiners, the word "
            "joiner, soft hyphens, variation selectors, tag characters or other "
            "default-ignorable ones)"
        )
    for segment in text.split(":"):
        part = segment.strip()
        if not part:
            return "must not have an empty segment (a ':' at either end, or '::')"
        if part in COERCED_RECEIPTS:
            return (
                f"must not have the segment {part!r}, what a missing value becomes as text: "
                "the field it is built from is missing"
            )
    return None


def text_problem(value: object, longest: int, *, empty: bool = True) -> str | None:
    """Free text up to ``longest`` characters (``empty=False``: at least one)."""
    if not isinstance(value, str) or len(value) > longest or (not empty and not value):
        return (
            f"must be at most {longest} characters"
            if empty
            else f"must be 1 to {longest} characters"
        )
    return storable_problem(value)


def run_index_problem(value: object) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_RUN_INDEX:
        return "must be between 0 and 2^31-1"
    return None
