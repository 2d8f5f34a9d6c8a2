"""What crosses the socket between the receiver and its writer process, in length-prefixed
pickles (both ends are this program).

The receiver sends ``("write", [(seq, LaneCall), …])`` (a whole turn of its event loop in one
frame) and ``("secrets", [text, …])`` (a new signing token's, to redact); the child sends
``("ready",)`` or ``("failed", message)`` once it has opened the ledger, then
``("done", [(seq, Reply), …], units, round_trips)`` for each batch it committed. The first
frame of all is the receiver's: the arguments the child builds its ledger from.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, NamedTuple

from pydantic import BaseModel

from flowledger.receiver.api.auth import Once

_LENGTH = struct.Struct("!I")
READ_SIZE = 1 << 20  # bytes asked of the socket at a time


class LaneCall(NamedTuple):
    """One workflow call as the writer process needs it to build and run its unit. A named
    tuple: one is made and pickled per call, and a tuple is the cheapest of both
    (bench/README.md, "Where the SQLite receiver stands")."""

    call: str  # a name in :data:`~flowledger.receiver.api.routes.calls.CALLS`
    operation_id: str | None
    body: BaseModel
    actor: str
    token_id: int
    key: str | None  # the Idempotency-Key, checked
    fingerprint: str  # the request's hash, for a key
    ttl: float  # seconds an Idempotency-Key's answer is kept
    guard: Once | None  # the signature, recorded once
    observe: bool  # the answer's value is wanted back (the call has an ``observe``)


def pack(message: Any) -> bytes:
    """``message`` as one frame: its length, then its pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


class Frames:
    """Length-prefixed frames out of a byte stream that arrives in pieces."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        """The messages ``data`` completes, in order; the rest waits for more."""
        buffer = self._buffer
        buffer += data
        start = 0
        messages = []
        while len(buffer) - start >= _LENGTH.size:
            (length,) = _LENGTH.unpack_from(buffer, start)
            end = start + _LENGTH.size + length
            if len(buffer) < end:
                break
            messages.append(pickle.loads(memoryview(buffer)[start + _LENGTH.size : end]))
            start = end
        del buffer[:start]
        return messages
