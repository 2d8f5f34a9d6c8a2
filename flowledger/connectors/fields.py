"""Reading fields out of a tool's JSON: every wrong type or size is :class:`Malformed`, named."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flowledger.connectors.base import MAX_ID, Malformed, clean_text


def text(item: dict[str, Any], key: str, *, limit: int, required: bool = False) -> str | None:
    value = item.get(key)
    if value is None:
        if required:
            raise Malformed(f"an execution has no {key}")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise Malformed(f"{key} is {type(value).__name__}, not a string")
    value = str(value)
    if not value or len(value) > limit or not value.isprintable():
        raise Malformed(f"{key} {clean_text(value, 60)!r} is empty, too long or not printable")
    return value


def ident(item: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    return text(item, key, limit=MAX_ID, required=required)


def time(item: dict[str, Any], key: str) -> datetime | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 40:
        raise Malformed(f"{key} is not a time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise Malformed(f"{key} {clean_text(value, 40)!r} is not an ISO 8601 time") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} is {type(value).__name__}, not an object")
    return value


def items(body: Any, key: str, what: str) -> list[Any]:
    value = obj(body, what).get(key)
    if not isinstance(value, list):
        raise Malformed(f"{what} has no {key!r} list")
    return value


def position(stored: str | None, tool: str) -> dict[str, Any]:
    """A connector's own stored position: a JSON object, or nothing yet."""
    if not stored:
        return {}
    try:
        data = json.loads(stored)
    except ValueError as exc:
        raise Malformed(f"the stored {tool} position is not JSON; reset the source") from exc
    return obj(data, f"the stored {tool} position")
