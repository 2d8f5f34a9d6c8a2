"""A broken ``flowledger.toml`` is refused the same way by every command: the one line that
names the file and what is wrong, exit 2, before the command does anything. The commands are
listed from the app, so a new one is held to it too. Two say it in their own way: ``tui``
opens on the defaults (tests/functional/test_tui_config.py) and ``doctor`` reports the file
and its verdict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.cli.common import BROKEN_SETTINGS_HANDLED, READS_NO_SETTINGS
from tests.support.ledgers import new_ledger

runner = CliRunner()

# Each kind of broken file, and what the line says after the file's path.
BROKEN = {
    "unknown key": (
        '[sweep]\nintervall = "1m"\n',
        "sweep.intervall: unknown key; did you mean 'interval'?",
    ),
    "bad duration": (
        '[sweep]\ninterval = "soon"\n',
        "sweep.interval: 'soon' is not a duration (use e.g. '90s', '15m', '24h', '2d')",
    ),
    "broken TOML": (
        '[sweep]\ninterval = "1m"\nthis is not toml\n',
        "not valid TOML: Expected '=' after a key in a key/value pair (at line 3, column 6)",
    ),
}
GOOD = """
max_attempts = 3

[[sources]]
name = "prod-n8n"
kind = "n8n"
base_url = "http://n8n.test"
"""


def _commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command a person can run, as its words and its click command: the groups'
    commands, and a group that runs when given no command (``sources``)."""
    root = typer.main.get_command(app)
    top = root.make_context("flowledger", [], resilient_parsing=True)

    def walk(group: Any, ctx: Any, words: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            is_group = hasattr(command, "list_commands")
            if not is_group or command.invoke_without_command:
                yield (*words, name), command
            if is_group:
                sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
                yield from walk(command, sub, (*words, name))

    return walk(root, top, ())


def _handles_it(command: Any) -> bool:
    return bool(getattr(command.callback, BROKEN_SETTINGS_HANDLED, False))


def _reads_none(command: Any) -> bool:
    return bool(getattr(command.callback, READS_NO_SETTINGS, False))


def _command_line(words: tuple[str, ...], command: Any) -> list[str]:
    """The command with a value for each required argument and option: the settings are
    refused before any of them is looked at."""
    line = list(words)
    for param in command.params:
        if param.required:
            line += ["1"] if param.param_type_name == "argument" else [param.opts[0], "1"]
    return line


REFUSING = [
    (words, command)
    for words, command in _commands()
    if not (_handles_it(command) or _reads_none(command))
]


def _use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, ledger: bool = False
) -> Path:
    """``text`` as ``tmp_path/flowledger.toml`` (none when None), the current folder
    ``tmp_path``; the ledger there (``FLOWLEDGER_DB``), made when ``ledger``."""
    path = tmp_path / "flowledger.toml"
    if text is not None:
        path.write_text(text)
    db = tmp_path / "ledger.db"
    if ledger:
        new_ledger(db).dispose()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_CONFIG", raising=False)
    monkeypatch.setenv("FLOWLEDGER_DB", str(db))
    return path


def test_only_the_terminal_ui_and_doctor_take_a_broken_file_their_own_way() -> None:
    assert {" ".join(w) for w, c in _commands() if _handles_it(c)} == {"tui", "doctor"}
    # A witness, run for another team's ledger, reads no ledger settings at all.
    assert {" ".join(w) for w, c in _commands() if _reads_none(c)} == {
        "witness forget",
        "witness key create",
        "witness serve",
    }
    assert {"status", "holds", "run", "sweep", "sources", "sources check"} <= {
        " ".join(words) for words, _ in REFUSING
    }


@pytest.mark.parametrize("kind", list(BROKEN))
@pytest.mark.parametrize(
    ("words", "command"), REFUSING, ids=[" ".join(words) for words, _ in REFUSING]
)
def test_every_command_refuses_a_broken_file_in_the_same_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, words: tuple[str, ...], command: Any, kind: str
) -> None:
    text, said = BROKEN[kind]
    path = _use(tmp_path, monkeypatch, text)
    done = runner.invoke(app, _command_line(words, command))
    assert (done.exit_code, done.stdout) == (2, "")
    assert done.stderr == f"flowledger: {path}: {said}\n"
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "var").exists()


def test_the_file_is_refused_where_flowledger_config_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path, monkeypatch, None, ledger=True)
    elsewhere = tmp_path / "etc" / "flowledger.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(BROKEN["unknown key"][0])
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(elsewhere))
    done = runner.invoke(app, ["status"])
    assert done.exit_code == 2
    assert done.stderr == f"flowledger: {elsewhere}: {BROKEN['unknown key'][1]}\n"


def test_a_group_leaves_the_check_to_its_command_and_its_help(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path, monkeypatch, BROKEN["broken TOML"][0])
    done = runner.invoke(app, ["sources", "check", "--help"])
    assert done.exit_code == 0 and done.stdout.startswith("Usage: flowledger sources check")


def _settings_row(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("settings:")).split(
        maxsplit=1
    )[1]


def test_doctor_names_the_file_it_read_and_finds_it_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _use(tmp_path, monkeypatch, GOOD, ledger=True)
    done = runner.invoke(app, ["doctor"])
    assert done.exit_code == 0, done.output
    assert _settings_row(done.stdout) == f"{path}: valid (1 source)"
    assert done.stdout.splitlines()[1].startswith("settings:")  # after the database


def test_doctor_says_the_defaults_apply_when_there_is_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path, monkeypatch, None, ledger=True)
    done = runner.invoke(app, ["doctor"])
    assert done.exit_code == 0, done.output
    assert _settings_row(done.stdout) == (
        f"none (no {tmp_path / 'flowledger.toml'}, no FLOWLEDGER_CONFIG): the defaults"
    )


@pytest.mark.parametrize("kind", list(BROKEN))
def test_doctor_reports_a_broken_file_in_the_refusals_words_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    text, said = BROKEN[kind]
    path = _use(tmp_path, monkeypatch, text, ledger=True)
    done = runner.invoke(app, ["doctor"])
    assert done.exit_code == 2 and done.stderr == ""
    assert _settings_row(done.stdout) == (
        f"ERROR: {path}: {said} (every other command but tui refuses it)"
    )
    assert "schema version:" in done.stdout  # the rest of the report is there


def test_doctor_reports_flowledger_config_pointing_at_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(tmp_path, monkeypatch, None, ledger=True)
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(tmp_path / "missing.toml"))
    done = runner.invoke(app, ["doctor"])
    assert done.exit_code == 2
    assert _settings_row(done.stdout).startswith(
        f"ERROR: FLOWLEDGER_CONFIG points at {tmp_path / 'missing.toml'}, which is not a file"
    )
