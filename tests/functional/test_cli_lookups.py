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


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["show", "invoice:9"], "no operation 'invoice:9'"),
        (["hold", "9999", "note", "--note", "n", "--yes"], "no hold 9999"),
        (["proof", "invoice:9"], "no events of operation 'invoice:9' in the checkpoint's"),
        (["sources", "check", "nope"], "no source named 'nope' in the configuration (prod-n8n)"),
        (["sync", "--once", "--source", "nope"], "no source named 'nope'"),
        (["n8n", "setup", "--source", "nope"], "no source named 'nope'"),
        (["executions", "--source", "nope"], "--source 'nope' is not one of: prod-n8n"),
        (["executions", "--after", "424242"], "no execution row 424242 to continue after"),
        (["token", "revoke", "nope"], "no active token named 'nope'"),
        (["token", "revoke", "old"], "no active token named 'old': it is revoked already"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_name_or_id_that_is_not_there_exits_not_found_in_one_line(
    workdir: Path, args: list[str], said: str
) -> None:
    code, out, err = run(*args)
    assert (code, out) == (NOT_FOUND, "")
    assert err.startswith("flowledger: ") and err.count("\n") == 1 and said in err, err


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
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_value_outside_its_set_is_refused_naming_the_allowed_ones(
    workdir: Path, args: list[str], said: str
) -> None:
    code, out, err = run(*args)
    assert (code, out) == (BAD_INPUT, "")
    assert err.startswith("flowledger: ") and err.count("\n") == 1 and said in err, err
