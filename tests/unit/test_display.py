"""Outside text as a person sees it: nothing a terminal acts on, nothing reordered."""

from __future__ import annotations

import pytest

from flowledger.domain.display import counted, has_unsafe, visible


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


def test_counted_says_one_in_the_singular_and_the_rest_in_the_plural() -> None:
    assert [counted(n, "hold") for n in (0, 1, 2)] == ["0 holds", "1 hold", "2 holds"]
    assert counted(1, "published head") == "1 published head"
    assert counted(3, "body", "bodies") == "3 bodies"
