"""A request's JSON body, read strictly: UTF-8 as RFC 8259 requires between systems, and every
object's keys once.

Python's ``json.loads`` is lenient where two readers of one body could disagree: given bytes it
guesses UTF-16 or UTF-32 and skips a byte order mark, and an object with a key twice keeps its
last value, where a proxy, a log or another parser may keep the first (and see another input
than the one the ledger hashed). Here each of those is a ``400`` naming the problem; a charset
other than UTF-8 in the Content-Type too, since the body is read as UTF-8 whatever it says, and
a Content-Encoding, since the body is never decompressed. No web framework here: the workflow
calls' routes and the hold routes both read their bodies through :func:`loads`.
"""

from __future__ import annotations

import json
from typing import Any

from flowledger.receiver.api.errors import INVALID_JSON, ApiError

UTF8_BOM = b"\xef\xbb\xbf"
BYTE_ORDER_MARK = ApiError(
    400, "byte_order_mark", "the body starts with a byte order mark: send UTF-8 without one"
)
# JSON text never holds a NUL byte (a NUL in a string is written \u0000); UTF-16 and UTF-32
# text holds one in every ASCII character.
NOT_UTF8 = ApiError(
    400, "invalid_utf8", "the body is not UTF-8 (UTF-16, UTF-32 or another encoding): send UTF-8"
)
DUPLICATE_KEY = ApiError(
    400, "duplicate_key", "the body has an object with the same key twice: send each key once"
)


class _DuplicateKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict, refused when a key came twice (at any depth: the decoder
    calls this for every object it reads)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _DuplicateKey
    return value


_DECODER = json.JSONDecoder(object_pairs_hook=_unique)


def loads(body: bytes) -> Any:
    """``body`` as JSON, or the :class:`ApiError` that names what is wrong with it."""
    if body.startswith(UTF8_BOM):
        raise BYTE_ORDER_MARK
    if b"\x00" in body:
        raise NOT_UTF8
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise NOT_UTF8 from None
    try:
        return _DECODER.decode(text)
    except _DuplicateKey:
        raise DUPLICATE_KEY from None
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", INVALID_JSON) from None


def _refused(code: str, value: str, message: str) -> ApiError:
    """400 ``code``, ``message`` naming ``value`` (a header's, shown escaped and cut short)
    where it has ``{}``."""
    shown = repr(value.encode("ascii", "backslashreplace").decode()[:40])
    return ApiError(400, code, message.format(shown))


def headers_problem(content_type: str, content_encoding: str | None) -> ApiError | None:
    """The refusal of a Content-Type whose ``charset`` is not UTF-8 (none is UTF-8, as JSON
    is), or of a Content-Encoding (gzip, say) the body is not read through; or ``None``."""
    if content_encoding is not None and content_encoding.strip().lower() != "identity":
        return _refused(
            "unsupported_content_encoding",
            content_encoding,
            "the body is read as it is sent, not decoded from {}: send it without a "
            "Content-Encoding",
        )
    _, _, parameters = content_type.partition(";")
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset != "utf-8":
            return _refused(
                "unsupported_charset",
                charset,
                "the body is read as UTF-8, not {}: send it as Content-Type: application/json "
                "(or with charset=utf-8)",
            )
    return None
