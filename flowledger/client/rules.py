"""What the client decides without a network: the input's canonical form and hash, the
operation ids it refuses, the ``Idempotency-Key`` of a call, the request signature and the
receipts it refuses. The same forms as the ledger's own (``flowledger.domain``) and the n8n
node's, written again here so that the client imports nothing of the server."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

MAX_ID_LENGTH = 200
MAX_RECEIPT_LENGTH = 1000
MAX_ERROR_LENGTH = 2000

# What a missing value becomes as text: JavaScript's (the ledger refuses these too) and
# Python's own ``str(None)``, which the ledger would take but this client refuses.
COERCED = frozenset({"undefined", "null", "[object Object]", "NaN", "None"})

_CONTROL_OR_BIDI = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
# Unicode's Default_Ignorable_Code_Point (the ranges the ledger refuses in an operation id).
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8; NaN and infinities are refused (they have no JSON)."""
    return _CANONICAL.encode(value).encode("utf-8")


def input_hash(value: Any, secret: bytes | None = None) -> str:
    """``sha256:<hex>`` of the canonical input, or ``hmac-sha256:<hex>`` keyed with the
    ledger's ``FLOWLEDGER_SECRET``: the hash the ledger makes of the same input."""
    body = canonical_json(value)
    if secret:
        return "hmac-sha256:" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def id_problem(value: object, what: str) -> str | None:
    """Why ``value`` cannot be an id (an execution id, a version), or ``None``."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_LENGTH:
        return f"{what} must be text of 1 to {MAX_ID_LENGTH} characters, not {value!r}"
    if value.strip() in COERCED:
        return f"{what} is {value.strip()!r}, what a missing value becomes as text"
    if _CONTROL_OR_BIDI.search(value):
        return f"{what} must not contain control or bidi characters"
    return None


def operation_id_problem(value: object) -> str | None:
    """Why the ledger would refuse ``value`` as an operation id (or this client does, for a
    ``None`` segment), or ``None``: ``invoice:None:send`` is built from a missing field, and
    every later call missing it would name the same operation."""
    problem = id_problem(value, "the operation id")
    if problem is not None:
        return problem
    text = str(value)
    hidden = _IGNORABLE.search(text)
    if hidden is not None:
        return (
            f"the operation id {text.encode('unicode_escape').decode('ascii')!r} has an "
            f"invisible character (U+{ord(hidden.group()):04X}): the data it is built from "
            "holds one"
        )
    for segment in text.split(":"):
        part = segment.strip()
        if not part:
            return (
                f"the operation id {text!r} has an empty segment: "
                "it is built from a missing or empty value"
            )
        if part in COERCED:
            return (
                f"the operation id {text!r} has the segment {part!r}: "
                "it is built from a missing value"
            )
    return None


def receipt_problem(value: object) -> str | None:
    """Why ``value`` is no receipt (the target's reference for the write), or ``None``."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return f"the receipt is {type(value).__name__}, not the target's reference (text)"
    text = str(value)
    if not text.strip():
        return "the receipt is empty: the target's answer carried no reference"
    if text.strip() in COERCED:
        return f"the receipt is {text.strip()!r}, what a missing value becomes as text"
    if len(text) > MAX_RECEIPT_LENGTH:
        return f"the receipt is longer than {MAX_RECEIPT_LENGTH} characters"
    return None


def idempotency_key(
    call: str,
    *,
    workflow_id: str | None,
    execution_id: str,
    step: str | None,
    run_index: int,
    operation_id: str,
) -> str:
    """The ``Idempotency-Key`` of one call: the same execution and run sending the same call
    for the same operation again (a retry after a lost answer, in this client or by the
    workflow tool) sends the same key and gets the stored answer; anything else differs. The
    n8n node's derivation, with the step in place of the node and no item index."""
    material = json.dumps(
        [workflow_id or "", execution_id, step or "", run_index, call, operation_id],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    digest = hashlib.sha256(material.encode("utf-8")).hexdigest()
    return f"py-{call}-{digest[:48]}"


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def signing_key(secret_hex: str) -> bytes:
    """The HMAC key: the bytes the 64 hex characters of ``token create --signing`` spell."""
    text = secret_hex.strip()
    if not _HEX64.fullmatch(text):
        raise ValueError(
            "the signing secret must be the 64 hex characters "
            "`flowledger token create --signing` printed"
        )
    return bytes.fromhex(text)


def signature(key: bytes, unix_seconds: int, method: str, path: str, body: bytes) -> str:
    """``t=<unix>,v2=<hex HMAC-SHA256 of "t.METHOD.PATH.body">``, PATH as sent with its
    query."""
    signed = f"{unix_seconds}.{method.upper()}.{path}.".encode() + body
    return f"t={unix_seconds},v2={hmac.new(key, signed, hashlib.sha256).hexdigest()}"
