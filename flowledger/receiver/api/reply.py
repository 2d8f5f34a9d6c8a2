"""An answer as the writer gives it: status, the exact body bytes, and the headers. Made where
the call is written (the writer process among them, so no web framework here) and turned into
an HTTP response by the route that served the call
(:mod:`flowledger.receiver.api.routes.calls`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowledger.domain.records import direct_init
from flowledger.receiver.api.errors import ApiError, error_body

REPLAYED = "Idempotent-Replayed"
JSON = "application/json"


@direct_init
@dataclass(frozen=True)
class Reply:
    """An answer's status and exact body bytes; ``replayed`` when it came from storage."""

    status: int
    body: bytes
    value: Any = None
    replayed: bool = False
    headers: Mapping[str, str] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # The writer process sends every answer back pickled: as its values, not a state dict.
        return Reply, (self.status, self.body, self.value, self.replayed, self.headers)

    @classmethod
    def error(cls, exc: ApiError) -> Reply:
        body = dumps(error_body(exc.code, exc.message, exc.field))
        return cls(exc.status, body, headers=exc.headers)

    def header_map(self) -> dict[str, str]:
        """The headers besides the body's type and length."""
        headers = dict(self.headers or {})
        if self.replayed:
            headers[REPLAYED] = "true"
        return headers


# One encoder for every answer: ``json.dumps`` with options builds a new one on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()
