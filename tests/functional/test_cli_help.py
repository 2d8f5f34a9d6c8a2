"""``--help`` for every command reads as written: flags without a ``<bool>``, and square
brackets in the text (``[alerts]``, ``[default: …]``) kept, not taken as markup."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import flowledger
from flowledger.cli import app


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group of its own
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


EVERY = sorted(commands(typer.main.get_group(app)))


def help_of(*path: str) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_listed() -> None:
    assert {("sync",), ("token", "list"), ("sources", "check"), ("run",)} <= set(EVERY)


@pytest.mark.parametrize("path", EVERY, ids=lambda p: " ".join(p) or "flowledger")
def test_no_flag_is_shown_with_a_bool_and_nothing_is_drawn(path: tuple[str, ...]) -> None:
    text = help_of(*path)
    assert "<bool>" not in text
    assert "╭" not in text and "│" not in text


# How typer names a value it has no name for: by its type (`<str>`, `<int range>`, `<path>`),
# and a required argument in the usage line in braces (`{operation_id}`).
TYPE_NAME = re.compile(r"<[a-z][a-z ]*>")


@pytest.mark.parametrize("path", EVERY, ids=lambda p: " ".join(p) or "flowledger")
def test_every_value_is_named_for_what_it_is(path: tuple[str, ...]) -> None:
    text = help_of(*path)
    assert TYPE_NAME.findall(text) == [] and "{" not in text and "}" not in text, text


def test_an_argument_reads_as_its_name_in_the_usage_and_the_list() -> None:
    lines = help_of("show").splitlines()
    assert lines[0] == "Usage: flowledger show [OPTIONS] OPERATION_ID"
    assert lines[lines.index("Arguments:") + 1].split()[:3] == [
        "OPERATION_ID",
        "The",
        "operation's",
    ]


def test_flags_read_as_flags() -> None:
    lines = help_of("sync").splitlines()
    once = next(line for line in lines if "--once" in line)
    assert once.split()[:2] == ["--once", "Sync"]
    # Values are named for what they are, not typed as `<str>` or `<int range>`.
    serve = help_of("serve")
    assert "--db PATH|URL" in serve and "--host HOST" in serve and "--port PORT" in serve
    assert "<str>" not in serve and "<int range>" not in serve


def test_square_brackets_in_help_are_words() -> None:
    assert "due to the [alerts] urls" in help_of("alerts")
    assert "[default: ./var/flowledger.db]" in " ".join(help_of("status").split())
    assert "[receiver.port]" in help_of("serve")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_the_package_s(flag: str) -> None:
    result = CliRunner().invoke(app, [flag])
    assert result.exit_code == 0, result.output
    assert result.output == f"flowledger {flowledger.__version__}\n"
    # pyproject.toml takes the version from flowledger.__version__: one place for it.
    assert metadata.version("flowledger") == flowledger.__version__
    assert "-V, --version" in help_of()


@pytest.mark.parametrize("path", EVERY, ids=lambda p: " ".join(p) or "flowledger")
def test_h_is_help_on_every_command_and_group(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "-h"], terminal_width=100)
    assert result.exit_code == 0, result.output
    assert result.output == help_of(*path)
    assert "-h, --help" in result.output


def test_the_help_names_the_exit_codes() -> None:
    text = " ".join(help_of().split())
    assert "Exit codes: 0 done; 1 a check failed" in text and "3 not found" in text
    assert "4 someone else got there first" in text
