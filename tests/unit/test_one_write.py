"""An answer's head and body go out in one write; nothing else is held or reordered."""

from __future__ import annotations

from typing import Any

from flowledger.receiver.engine.server import OneWrite


class Wire:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def test_the_head_goes_out_with_the_body() -> None:
    wire = Wire()
    conn = OneWrite(wire)
    conn.write(HEAD)
    assert wire.writes == []
    conn.write(b"{}")
    conn.write(b"more")
    assert wire.writes == [HEAD + b"{}", b"more"]


def test_a_continue_passes_at_once_and_the_head_is_still_held() -> None:
    wire = Wire()
    conn = OneWrite(wire)
    conn.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    conn.write(HEAD)
    assert wire.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    conn.write(b"")
    assert wire.writes[-1] == HEAD


def test_closing_or_asking_anything_else_sends_a_held_head_first() -> None:
    wire = Wire()
    conn = OneWrite(wire)
    conn.write(HEAD)
    conn.close()
    assert wire.writes == [HEAD] and wire.closed
    other: Any = OneWrite(Wire())
    other.write(HEAD)
    assert other.is_closing() is False
    assert other._transport.writes == [HEAD]
