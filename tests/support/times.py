"""The one written form of a time for machines, checked over a whole JSON document."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

# ISO 8601 in UTC with +00:00, the second's fraction when it has one (never "Z", never a space).
MACHINE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?\+00:00")
# Anything that starts as a time does.
LOOKS_LIKE_A_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def times_in(value: Any) -> Iterator[str]:
    """Every string of a JSON document that is a time."""
    if isinstance(value, dict):
        for item in value.values():
            yield from times_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from times_in(item)
    elif isinstance(value, str) and LOOKS_LIKE_A_TIME.match(value):
        yield value


def odd_times(document: Any) -> list[str]:
    """The times of ``document`` not written in the one form for machines."""
    return [t for t in times_in(document) if not MACHINE_TIME.fullmatch(t)]
