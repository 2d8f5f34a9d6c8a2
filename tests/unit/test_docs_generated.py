"""The generated reference in docs/ is what the code makes now: the commands from the typer
app, the settings from the settings models (docs/generate.py, ``make docs``). A help text,
an option or a setting changed without ``make docs`` fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_is_current() -> None:
    stale = generator().stale()
    assert not stale, f"stale: {', '.join(stale)}; run `make docs`"


def test_every_command_and_setting_is_in_the_reference() -> None:
    commands = (ROOT / "docs" / "commands.md").read_text()
    settings = (ROOT / "docs" / "settings.md").read_text()
    for name in ("flowledger sweep", "flowledger token create", "flowledger n8n setup"):
        assert f"`{name}`" in commands
    for key in ("`FLOWLEDGER_SECRET`", "`[sweep]`", "`dispatch_deadline`", "`[[sources]]`"):
        assert key in settings


def test_a_stale_block_is_found_and_rewritten(tmp_path: Path) -> None:
    gen = generator()
    begin = gen.BEGIN.format(name="part")
    old = f"before\n{begin}\nold text\n{gen.END}\nafter\n"
    new = gen.filled(old, {"part": lambda: "new text"}, "x.md")
    assert new == f"before\n{begin}\nnew text\n{gen.END}\nafter\n"
    assert gen.filled(new, {"part": lambda: "new text"}, "x.md") == new


def test_a_setting_without_a_meaning_is_refused() -> None:
    from pydantic import BaseModel, Field

    gen = generator()

    class Section(BaseModel):
        said: int = Field(default=1, description="Something.")
        unsaid: int = 2

    with pytest.raises(gen.Undocumented, match=r"\[x\] unsaid"):
        gen._table(Section, lambda key: f"[x] {key}", "key", set())


def test_a_meaning_for_no_setting_is_refused() -> None:
    gen = generator()
    with pytest.raises(gen.Undocumented, match="gone"):
        gen._unused({"[x] kept"}, lambda n: True, {"[x] kept": "", "[x] gone": ""})
