"""How text that came from outside is shown to a person, on any screen the ledger draws.

A workflow name, an error message, a receipt or an ``input_ref`` is written by a workflow or by
the system it called; printed as it is, an ESC sequence recolours the terminal, moves the
cursor or sets the window title, a CR/LF forges a line, and a bidi override makes text read in
another order than it is stored. :func:`visible` is the one place that turns those characters
into visible escapes (``\\x1b``, ``\\r``, ``\\u202e``); the CLI's listings, the terminal UI and the
handover report all show outside text through it. What is stored and exported (JSON) is
unchanged.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls (ESC starts every terminal sequence, CSI/OSC are C1 too).
CONTROLS = "\x00-\x1f\x7f-\x9f"
# Bidirectional marks, embeddings, overrides and isolates, and the line/paragraph separators
# that some terminals and viewers break lines at.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
UNSAFE = re.compile(f"[{CONTROLS}{BIDI}]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def visible(value: object) -> str:
    """``value`` as text with every control, ESC and bidi character written as an escape;
    ``None`` is ``-``."""
    text = "-" if value is None else str(value)
    return UNSAFE.sub(_escape, text)


def has_unsafe(value: str) -> bool:
    """Whether ``value`` holds a character :func:`visible` would escape."""
    return UNSAFE.search(value) is not None


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and its noun, singular for one and plural otherwise: ``1 hold``, ``0 holds``,
    ``2 holds`` (``nouns`` when the plural is not the noun and an s)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"
