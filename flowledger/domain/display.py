"""How text that came from outside is shown to a person, on any screen the ledger draws.

A workflow name, an error message, a receipt or an ``input_ref`` is written by a workflow or by
the system it called; printed as it is, an ESC sequence recolours the terminal, moves the
cursor or sets the window title, a CR/LF forges a line, a bidi override makes text read in
another order than it is stored, and an invisible character (a zero-width space, a tag
character) makes two different values look the same. :func:`visible` is the one place that
turns those characters into visible escapes (``\\x1b``, ``\\r``, ``\\u202e``, ``\\u200b``); the
CLI's listings, the terminal UI and the handover report all show outside text through it. What
is stored is unchanged; every JSON the ledger prints or answers is ASCII, those characters
among the rest as JSON's own ``\\u`` escapes.
"""

from __future__ import annotations

import re
import unicodedata

# C0 controls, DEL and C1 controls (ESC starts every terminal sequence, CSI/OSC are C1 too).
CONTROLS = "\x00-\x1f\x7f-\x9f"
# Bidirectional marks, embeddings, overrides and isolates, and the line/paragraph separators
# that some terminals and viewers break lines at.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
# Unicode's Default_Ignorable_Code_Point, as DerivedCoreProperties.txt lists it in Unicode 14.0
# (the version of Python's unicodedata and of Perl 5.36's tables, which list the same ranges;
# unicodedata has no such property): characters a renderer shows as nothing, such as the soft
# hyphen, the zero-width space and joiners, the word joiner, variation selectors, the BOM,
# Hangul fillers and the tag characters (U+E0000-E007F, within the last range).
IGNORABLE = (
    "\u00ad\u034f\u061c\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
CONTROL_OR_BIDI = re.compile(f"[{CONTROLS}{BIDI}]")
IGNORABLE_CHAR = re.compile(f"[{IGNORABLE}]")
UNSAFE = re.compile(f"[{CONTROLS}{BIDI}{IGNORABLE}]")


# The two ignorables that emoji are made of, left as they are inside an emoji: a variation
# selector (text or emoji presentation) right after a symbol, and a zero-width joiner between
# two parts of one emoji (a symbol, a skin tone, an emoji presentation selector, then a symbol).
# "✉️ Send", an n8n node's name, stays as it reads; alone, or beside letters, they are escaped.
PRESENTATION = "\ufe0e\ufe0f"
ZWJ = "\u200d"
EMOJI_PART = {"So", "Sk"}


def _emoji_part(char: str) -> bool:
    return unicodedata.category(char) in EMOJI_PART or char in PRESENTATION


def _in_emoji(text: str, at: int) -> bool:
    """Whether the ignorable at ``text[at]`` is a presentation selector or joiner inside an
    emoji (see :data:`PRESENTATION`)."""
    char = text[at]
    before = text[at - 1] if at > 0 else ""
    if char in PRESENTATION:
        return before != "" and unicodedata.category(before) == "So"
    if char == ZWJ:
        after = text[at + 1] if at + 1 < len(text) else ""
        return (
            before != ""
            and _emoji_part(before)
            and after != ""
            and (unicodedata.category(after) == "So")
        )
    return False


def _escape(match: re.Match[str]) -> str:
    if _in_emoji(match.string, match.start()):
        return match.group()
    return match.group().encode("unicode_escape").decode("ascii")


def visible(value: object) -> str:
    """``value`` as text with every control, ESC, bidi and invisible character written as an
    escape (but for those inside an emoji: :data:`PRESENTATION`); ``None`` is ``-``."""
    text = "-" if value is None else str(value)
    return UNSAFE.sub(_escape, text)


def has_unsafe(value: str) -> bool:
    """Whether ``value`` holds a control, bidi or invisible character, an emoji's joiners
    and presentation selectors included (which :func:`visible` leaves inside an emoji)."""
    return UNSAFE.search(value) is not None


def has_control_or_bidi(value: str) -> bool:
    """Whether ``value`` holds a control (C0, DEL, C1) or bidi character."""
    return CONTROL_OR_BIDI.search(value) is not None


def has_ignorable(value: str) -> bool:
    """Whether ``value`` holds a default-ignorable (invisible) character."""
    return IGNORABLE_CHAR.search(value) is not None


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and its noun, singular for one and plural otherwise: ``1 hold``, ``0 holds``,
    ``2 holds`` (``nouns`` when the plural is not the noun and an s)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"
