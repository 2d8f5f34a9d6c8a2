"""The operation id as a request's path carries it: refused unless it is UTF-8 as sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from flowledger.receiver.api.errors import ApiError

NOT_UTF8 = ApiError(
    422,
    "invalid_id",
    "the operation id must be valid UTF-8 once percent-decoded",
    "operation_id",
)


def check_raw_path(scope: Mapping[str, Any]) -> None:
    """Refuse a path that is not UTF-8 once percent-decoded (422 ``invalid_id``). The server
    decodes the path's percent escapes replacing bytes that are not UTF-8, so ``a%ffb``,
    ``a%feb`` and ``a%EF%BF%BDb`` would all name the operation ``a\ufffdb``; the path as sent
    is checked instead."""
    raw = scope.get("raw_path")
    if raw is not None:
        path = raw.partition(b"?")[0]
        try:
            # Without an escape the path is as sent (the usual id: no decoding to pay for).
            (unquote_to_bytes(path) if b"%" in path else path).decode("utf-8")
        except UnicodeDecodeError:
            raise NOT_UTF8 from None
