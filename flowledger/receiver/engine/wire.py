"""What crosses the socket between the receiver and its writer process, in length-prefixed
pickles (both ends are this program).

The receiver sends ``("write", [(seq, CallRequest), …], deadline)`` (a whole turn of its event
loop in one frame, and the ``time.monotonic()`` past which the receiver has answered what the
child has not: the child then leaves it out) and ``("secrets", [text, …])`` (a new signing
token's, to redact); the child sends ``("ready",)`` or ``("failed", message)`` once it has
opened the ledger, then ``("done", [(seq, Reply), …], units, round_trips,
checkpoints_short)`` for each batch it committed (the last two: its exchanges with the database
and its WAL checkpoints left short since the batch before, for the receiver's metrics). The
first frame of all is the receiver's: the arguments the child builds its ledger from.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

_LENGTH = struct.Struct("!I")
READ_SIZE = 1 << 20  # bytes asked of the socket at a time


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
