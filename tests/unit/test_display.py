"""Outside text as a person sees it: nothing a terminal acts on, nothing reordered."""

from __future__ import annotations

import pytest

from flowledger.domain.display import (
    counted,
    has_control_or_bidi,
    has_ignorable,
    has_unsafe,
    visible,
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("R\x1b[31mRED\x1b[0m", r"R\x1b[31mRED\x1b[0m"),
        ("a\r\nfake line", r"a\r\nfake line"),
        ("\x1b]0;owned\x07", r"\x1b]0;owned\x07"),
        ("\x9b2J\x85", r"\x9b2J\x85"),
        ("tab\tdel\x7f", r"tab\tdel\x7f"),
        ("pay\u202etxt.exe", r"pay\u202etxt.exe"),
        ("\u2066x\u2069\u200f\u061c", r"\u2066x\u2069\u200f\u061c"),
        ("\u2028line\u2029", r"\u2028line\u2029"),
        ("plain é 日本 [link](x) \xa0", "plain é 日本 [link](x) \xa0"),
        (None, "-"),
        (42, "42"),
    ],
    ids=[
        "colour",
        "forged-line",
        "osc-title",
        "c1-csi-and-nel",
        "tab-and-delete",
        "right-to-left-override",
        "isolates-and-marks",
        "line-separators",
        "ordinary-text",
        "none",
        "number",
    ],
)
def test_visible_writes_controls_and_bidi_as_escapes(value: object, shown: str) -> None:
    assert visible(value) == shown
    assert not has_unsafe(visible(value))


def test_has_unsafe_finds_what_visible_escapes() -> None:
    assert has_unsafe("a\x1bb") and has_unsafe("\u202e") and not has_unsafe("a b é")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("INV-42\u200b", r"INV-42\u200b"),
        ("a\u200c\u200db", r"a\u200c\u200db"),
        ("a\u2060b\ufeff", r"a\u2060b\ufeff"),
        ("soft\xadhyphen", r"soft\xadhyphen"),
        ("v1\ufe0f\u034f", r"v1\ufe0f\u034f"),
        ("\u3164\u115f\uffa0", r"\u3164\u115f\uffa0"),
        ("\U000e0001\U000e0041\U000e007f", r"\U000e0001\U000e0041\U000e007f"),
        ("\U000e0100\U0001d173\U0001bca0", r"\U000e0100\U0001d173\U0001bca0"),
    ],
    ids=[
        "zero-width-space",
        "joiners",
        "word-joiner-and-bom",
        "soft-hyphen",
        "variation-and-grapheme-joiner",
        "hangul-fillers",
        "tags",
        "supplementary-ignorables",
    ],
)
def test_visible_writes_invisible_characters_as_escapes(value: str, shown: str) -> None:
    assert visible(value) == shown
    assert has_ignorable(value) and not has_control_or_bidi(value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("\u2709\ufe0f Send", "\u2709\ufe0f Send"),  # an n8n node's name
        ("\U0001f469\U0001f3fd\u200d\U0001f4bb", "\U0001f469\U0001f3fd\u200d\U0001f4bb"),
        ("\U0001f441\ufe0f\u200d\U0001f5e8\ufe0f", "\U0001f441\ufe0f\u200d\U0001f5e8\ufe0f"),
        ("INV\ufe0f", r"INV\ufe0f"),
        ("\ufe0f\u2709", "\\ufe0f\u2709"),
        ("\u2709\u200d", "\u2709\\u200d"),
        ("a\u200d\u2709", "a\\u200d\u2709"),
        ("\u2709\u200b", "\u2709\\u200b"),
    ],
    ids=[
        "presentation",
        "skin-tone-zwj",
        "selector-zwj-selector",
        "selector-after-letters",
        "selector-first",
        "zwj-last",
        "zwj-after-a-letter",
        "zero-width-space-after-a-symbol",
    ],
)
def test_visible_leaves_an_emojis_joiners_and_escapes_them_elsewhere(
    value: str, shown: str
) -> None:
    assert visible(value) == shown
    assert has_unsafe(value)


def test_the_ignorable_ranges_end_where_unicode_ends_them() -> None:
    outside = "\xac\xae\u034e\u0350\u115e\u1161\u200a\u2010\u3163\u3165\ufe10\ufff9"
    assert not has_ignorable(outside + "\U000dffff\U000e1000\U0001bca4")
    inside = "\u180b\u180f\u2064\u2065\u206f\ufff0\ufff8\U000e0fff\U0001d17a"
    assert all(has_ignorable(c) for c in inside)


def test_counted_says_one_in_the_singular_and_the_rest_in_the_plural() -> None:
    assert [counted(n, "hold") for n in (0, 1, 2)] == ["0 holds", "1 hold", "2 holds"]
    assert counted(1, "published head") == "1 published head"
    assert counted(3, "body", "bodies") == "3 bodies"
