"""What a command is given to look up, or to pick from a closed set, as a script sees it: a
name or id that is not there exits 3 (``NOT_FOUND``) in one line, whichever command looked;
a value outside its set exits 2 in one line naming the allowed ones, never an empty answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.cli.common import BAD_INPUT, NOT_FOUND
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store
from tests.support.builders import req
from tests.support.cli import N8N_SOURCE, cli_workdir

CONFIG = N8N_SOURCE + '\n[checkpoints]\nkey = "{key}"\n'


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "checkpoint.key"
    db = cli_workdir(tmp_path, monkeypatch, CONFIG.format(key=key), TEST_N8N_API_KEY="k")
    store = open_store(str(db))
    try:
        Ledger(store).dispatch("invoice:1", req("e1")).run("token:n8n")
    finally:
        store.dispose()
    assert CliRunner().invoke(app, ["key", "create", str(key)]).exit_code == 0
    assert CliRunner().invoke(app, ["token", "create", "--name", "old", "--scope", "read"])
    assert CliRunner().invoke(app, ["token", "revoke", "old"]).exit_code == 0
    return tmp_path


def case_id(value: object) -> str:
    return " ".join(value) if isinstance(value, list) else ""


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def refused_in_one_line(args: list[str], code: int, said: str) -> None:
    """The command exits ``code`` with nothing on stdout and one line on stderr saying
    ``said``."""
    exit_code, out, err = run(*args)
    assert (exit_code, out) == (code, "")
    assert err.startswith("flowledger: ") and err.count("\n") == 1 and said in err, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["show", "invoice:9"], "no operation 'invoice:9'"),
        (["hold", "9999", "note", "--note", "n", "--yes"], "no hold 9999"),
        (["proof", "invoice:9"], "no events of operation 'invoice:9' in the log"),
        (["sources", "check", "nope"], "no source named 'nope' in the configuration (prod-n8n)"),
        (["sync", "--once", "--source", "nope"], "no source named 'nope'"),
        (["n8n", "setup", "--source", "nope"], "no source named 'nope'"),
        (["executions", "--source", "nope"], "--source 'nope' is not one of: prod-n8n"),
        (["executions", "--after", "424242"], "no execution row 424242 to continue after"),
        (["token", "revoke", "nope"], "no active token named 'nope'"),
        (["token", "revoke", "old"], "no active token named 'old': it is revoked already"),
    ],
    ids=case_id,
)
def test_a_name_or_id_that_is_not_there_exits_not_found_in_one_line(
    workdir: Path, args: list[str], said: str
) -> None:
    refused_in_one_line(args, NOT_FOUND, said)


def test_what_is_there_is_found(workdir: Path) -> None:
    assert run("show", "invoice:1")[0] == 0
    assert run("executions", "--source", "prod-n8n") == (0, "no executions\n", "")
    assert run("proof", "invoice:1")[0] == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["executions", "--status", "failed"],
            "--status 'failed' is not one of: new, running, waiting, success, error, crashed, "
            "canceled, unknown",
        ),
        (["export", "--format", "csv"], "--format 'csv' is not one of: jsonl"),
        (["handover", "--format", "html"], "--format 'html' is not one of: md"),
        (
            ["token", "create", "--name", "x", "--scope", "admin"],
            "--scope 'admin' is not one of: write, read, operator",
        ),
        (["holds", "--reason", "late"], "--reason 'late' is not one of: approval_expired, "),
        (["hold", "1", "close", "--note", "n"], "ACTION 'close' is not one of: confirm, release"),
    ],
    ids=case_id,
)
def test_a_value_outside_its_set_is_refused_naming_the_allowed_ones(
    workdir: Path, args: list[str], said: str
) -> None:
    refused_in_one_line(args, BAD_INPUT, said)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["executions", "--limit", "0"], "Invalid value for '--limit': "),
        (["verify", "--expect-head", "zz"], "'zz' is not a head hash"),
        (["show"], "Missing argument 'OPERATION_ID' (see flowledger show -h)"),
        (["sources", "check"], "Missing argument 'NAME' (see flowledger sources check -h)"),
        (["bogus"], "No such command 'bogus' (see flowledger -h)"),
        (["--bogus"], "No such option: --bogus (see flowledger -h)"),
    ],
    ids=case_id,
)
def test_a_command_line_click_cannot_take_is_refused_in_one_line(
    workdir: Path, args: list[str], said: str
) -> None:
    refused_in_one_line(args, BAD_INPUT, said)


def test_a_group_given_no_command_still_shows_its_help(workdir: Path) -> None:
    code, _, err = run("token")
    assert code == BAD_INPUT and err.startswith("Usage: flowledger token")
