"""An answer as the receiver sends it: status, the exact body bytes, and the headers; sent
straight through ASGI by the write lane, the body limit and the idempotency replay."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Send

from flowledger.domain.records import direct_init
from flowledger.receiver.api.errors import ApiError, error_body

REPLAYED = b"idempotent-replayed"
JSON = b"application/json"


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

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """The headers as ASGI sends them."""
        headers = [(b"content-type", JSON), (b"content-length", str(len(self.body)).encode())]
        if self.replayed:
            headers.append((REPLAYED, b"true"))
        for name, value in (self.headers or {}).items():
            headers.append((name.lower().encode("latin-1"), value.encode("latin-1")))
        return headers

    async def send(self, send: Send) -> None:
        """Answer with it through ASGI's ``send``."""
        start = {
            "type": "http.response.start",
            "status": self.status,
            "headers": self.raw_headers(),
        }
        await send(start)
        await send({"type": "http.response.body", "body": self.body})


# One encoder for every answer: ``json.dumps`` with options builds a new one on every call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()
