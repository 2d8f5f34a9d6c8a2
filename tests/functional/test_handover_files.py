"""Saved handover reports go to a folder of their own and never overwrite one another: not
within the same second, not a file already there, not from the CLI nor from the UI's ``H``."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app as cli
from flowledger.reports import handover
from flowledger.storage.engine import Store
from tests.support.builders import SHIFT_END
from tests.support.tui import settle


def test_two_reports_in_the_same_second_get_two_files(tmp_path: Path) -> None:
    first = handover.save("first\n", tmp_path / "reports", SHIFT_END)
    second = handover.save("second\n", tmp_path / "reports", SHIFT_END)
    assert first.name == f"handover-{SHIFT_END:%Y%m%d-%H%M%S}.md"
    assert second.name == f"handover-{SHIFT_END:%Y%m%d-%H%M%S}-2.md"
    assert (first.read_text(), second.read_text()) == ("first\n", "second\n")


def test_a_file_already_there_is_left_as_it_was(tmp_path: Path) -> None:
    taken = tmp_path / f"handover-{SHIFT_END:%Y%m%d-%H%M%S}.md"
    taken.write_text("someone else's")
    (tmp_path / f"{taken.stem}-2.md").symlink_to(tmp_path / "elsewhere")
    saved = handover.save("report\n", tmp_path, SHIFT_END)
    assert saved.name == f"{taken.stem}-3.md"
    assert taken.read_text() == "someone else's"
    assert not (tmp_path / "elsewhere").exists()  # a symlink is not followed


def test_saved_reports_are_their_owners_alone(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        saved = handover.save("report\n", tmp_path / "new" / "folder", SHIFT_END)
    finally:
        os.umask(old)
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700


@pytest.fixture
def cli_env(demo_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    config = tmp_path / "flowledger.toml"
    config.write_text("")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    monkeypatch.chdir(tmp_path)
    return str(demo_store.url.database)


def test_the_command_saves_into_out_without_overwriting(cli_env: str, tmp_path: Path) -> None:
    out = tmp_path / "shift-reports"
    said = []
    for _ in range(3):
        result = CliRunner().invoke(cli, ["handover", "--db", cli_env, "--out", str(out)])
        assert result.exit_code == 0, result.output
        said.append(result.output.removeprefix("handover report saved to ").strip())
    files = sorted(out.iterdir())
    assert len(files) == 3 and sorted(said) == [str(f) for f in files]
    assert all(f.read_text().startswith("# Handover report") for f in files)


def test_the_command_saves_under_var_handover_by_default(cli_env: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["handover", "--db", cli_env, "--save"])
    assert result.exit_code == 0, result.output
    (saved,) = (tmp_path / "var" / "handover").iterdir()
    assert result.output == f"handover report saved to {Path('var/handover') / saved.name}\n"


def test_the_command_without_save_prints_the_report_and_writes_nothing(
    cli_env: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["handover", "--db", cli_env])
    assert result.exit_code == 0 and result.output.startswith("# Handover report")
    assert not (tmp_path / "var").exists()


def test_a_folder_that_cannot_be_made_is_one_line(cli_env: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = CliRunner().invoke(
        cli, ["handover", "--db", cli_env, "--out", str(tmp_path / "a-file" / "sub")]
    )
    assert result.exit_code == 2
    assert result.output.startswith("flowledger: cannot save the report in ")
    assert len(result.output.splitlines()) == 1


async def test_the_handover_key_saves_a_new_file_each_time(app_factory: Any) -> None:
    app = app_factory()
    written = []
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(2):
            await settle(pilot)
            await pilot.press("H")
            await settle(pilot)
            written.append(app.last_report)
            await pilot.press("escape")
    assert written[0] != written[1]
    assert written[0].parent == written[1].parent
    assert all(p.read_text().startswith("# Handover report") for p in written)


async def test_the_handover_key_saves_under_var_handover_by_default(
    app_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = app_factory(report_dir=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("H")
        await settle(pilot)
    assert app.last_report is not None
    assert app.last_report.parent == tmp_path / "var" / "handover"
