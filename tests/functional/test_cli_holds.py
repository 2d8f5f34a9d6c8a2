"""``flowledger holds`` and ``flowledger hold ID ACTION`` as a script runs them: JSON that
parses and says what ``show --json`` says, filters that are exact, and an action that never
acts without being told to."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.cli.common import CONFLICT, NOT_FOUND
from flowledger.domain.times import for_people
from tests.functional.conftest import copy_demo

runner = CliRunner()


@pytest.fixture
def db(demo_template: Path, tmp_path: Path) -> str:
    return copy_demo(demo_template, tmp_path / "demo.db")


def _json(args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_holds_json_lists_each_open_hold_as_show_json_does(db: str) -> None:
    listed = _json(["holds", "--db", db, "--json"])
    assert isinstance(listed, list) and listed
    assert all(h["resolved_at"] is None for h in listed)
    for hold in listed:
        if hold["operation_id"] is None:
            assert hold["operation_state"] is None
            continue
        shown = _json(["show", hold["operation_id"], "--db", db, "--json"])
        as_shown = next(h for h in shown["holds"] if h["id"] == hold["id"])
        assert {k: v for k, v in hold.items() if k != "operation_state"} == as_shown
        assert hold["operation_state"] == shown["operation"]["state"]


def test_holds_filters_by_exact_reason_owner_and_overdue(db: str) -> None:
    everything = _json(["holds", "--db", db, "--json"])
    approvals = _json(["holds", "--db", db, "--json", "--reason", "approval_version_mismatch"])
    assert [h["reason"] for h in approvals] == ["approval_version_mismatch"]
    # A reason is matched whole: this one is in the other's name, and finds none of it.
    versions = _json(["holds", "--db", db, "--json", "--reason", "version_mismatch"])
    assert all(h["reason"] == "version_mismatch" for h in versions)
    owned = _json(["holds", "--db", db, "--json", "--owner", "carol"])
    assert owned and all(h["owner"] == "carol" for h in owned)
    overdue = _json(["holds", "--db", db, "--json", "--overdue"])
    assert len(overdue) == len(everything)  # the demo's shift is past


def test_holds_prints_a_table_and_refuses_an_unknown_reason(db: str) -> None:
    table = runner.invoke(app, ["holds", "--db", db])
    assert table.exit_code == 0
    assert table.output.splitlines()[0].split()[:3] == ["ID", "REASON", "OPERATION"]
    assert "unknown_outcome (blocking)" in table.output
    # Times for people, one form: to the second, in UTC, saying so.
    assert "OVERDUE 2026-11-02 14:20:00 UTC " in table.output
    deadlines = re.findall(r"OVERDUE (\S+ \S+ \S+)", table.output)  # the demo's are past
    assert len(deadlines) == len(table.output.splitlines()) - 1
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", d) for d in deadlines)
    bogus = runner.invoke(app, ["holds", "--db", db, "--reason", "bogus"])
    assert bogus.exit_code == 2
    assert bogus.output.count("\n") == 1
    assert "--reason 'bogus' is not one of: approval_expired, approval_version_mismatch" in (
        bogus.output
    )


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_holds_in_a_terminal_breaks_no_reason_id_state_or_time(
    db: str, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowledger.cli import tables

    listed = _json(["holds", "--db", db, "--json"])
    monkeypatch.setattr(tables, "_width", lambda: columns)  # a terminal this wide
    table = runner.invoke(app, ["holds", "--db", db])
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert max(len(line) for line in lines) <= columns
    header = lines[0].split()
    assert header[:3] == ["ID", "REASON", "OPERATION"] and "DEADLINE" in header
    words = table.output.split()
    for hold in listed:
        assert hold["reason"] in words
        assert (hold["operation_id"] or hold["source"]) in words
        if "STATE" in header and hold["operation_state"]:
            assert hold["operation_state"] in words
        deadline = datetime.fromisoformat(hold["deadline"])
        assert set(for_people(deadline).split()) <= set(words)
    if columns >= 120:
        assert header == ["ID", "REASON", "OPERATION", "STATE", "OWNER", "DEADLINE", "DETAIL"]


def _first(db: str, reason: str) -> int:
    found = _json(["holds", "--db", db, "--json", "--reason", reason])
    return int(found[0]["id"])


def test_an_action_without_yes_and_no_terminal_is_refused_and_changes_nothing(db: str) -> None:
    hold_id = _first(db, "unknown_outcome")
    before = _json(["holds", "--db", db, "--json"])
    result = runner.invoke(
        app, ["hold", str(hold_id), "release", "--db", db, "--note", "not at the bank"]
    )
    assert result.exit_code == 2
    assert result.output == (  # one line, as every refusal
        "flowledger: nothing changed: this action asks before it acts and stdin is not a"
        " terminal; pass --yes to act without asking\n"
    )
    assert _json(["holds", "--db", db, "--json"]) == before


@pytest.mark.parametrize(
    ("args", "said", "code"),
    [
        (["confirm", "--note", "seen"], "a receipt is required (--receipt)", 2),
        (["release"], "a note is required (--note)", 2),
        (["extend", "--note", "n", "--owner", "bob"], "--owner is not an option of extend", 2),
        (["extend", "--note", "n", "--deadline", "soon"], "cannot read 'soon' as a deadline", 2),
        (["frobnicate"], "ACTION 'frobnicate' is not one of: confirm, release, cancel", 2),
    ],
)
def test_an_action_missing_what_it_needs_is_one_line(
    db: str, args: list[str], said: str, code: int
) -> None:
    hold_id = _first(db, "unknown_outcome")
    result = runner.invoke(app, ["hold", str(hold_id), *args, "--db", db, "--yes"])
    assert result.exit_code == code
    assert result.output.count("\n") == 1 and said in result.output


def test_an_unknown_hold_exits_as_an_unknown_operation_does(db: str) -> None:
    hold = runner.invoke(app, ["hold", "9999", "note", "--note", "n", "--db", db, "--yes"])
    show = runner.invoke(app, ["show", "no:such:op", "--db", db])
    assert hold.exit_code == show.exit_code == NOT_FOUND == 3
    assert hold.output == "flowledger: no hold 9999\n"


def test_an_action_on_a_hold_someone_resolved_first_exits_as_a_conflict(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold_id = _first(db, "unknown_outcome")
    args = ["hold", str(hold_id), "release", "--note", "not sent", "--db", db, "--yes"]
    assert runner.invoke(app, args).exit_code == 0
    late = runner.invoke(app, args)
    assert late.exit_code == CONFLICT == 4
    assert late.output.startswith("flowledger: Someone else got there first: ")
    # The same when the other person's action lands between the hold's read and this one.
    from flowledger.cli import holds as holds_cli
    from flowledger.services import actions
    from flowledger.services.ledger import Ledger
    from flowledger.storage.engine import open_store

    other = _first(db, "unknown_outcome")

    def meanwhile(yes: bool) -> None:
        store = open_store(db)
        try:
            actions.call(Ledger(store), "release", other, "bob", actions.Values("seen")).run()
        finally:
            store.dispose()

    monkeypatch.setattr(holds_cli, "_can_ask", meanwhile)
    raced = runner.invoke(app, ["hold", str(other), "release", "--note", "n", "--db", db, "--yes"])
    assert raced.exit_code == CONFLICT, raced.output
    assert "Someone else got there first" in raced.output


def _answer_on_a_terminal(db: str, hold_id: int, answer: bytes) -> tuple[int, str, str]:
    """``hold ID note`` with its stdin and stderr on a pseudo-terminal: wait for its
    question, answer it; the exit code, stdout, and what the terminal showed."""
    master, slave = pty.openpty()
    command = [sys.executable, "-m", "flowledger.cli", "hold", str(hold_id), "note"]
    proc = subprocess.Popen(
        [*command, "--db", db, "--note", "called the bank", "--operator", "erin"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    shown = b""
    try:
        while b"[y/N]" not in shown:
            shown += os.read(master, 1024)  # blocks until the child writes (EIO once it ends)
        os.write(master, answer + b"\n")
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(master)
    return proc.returncode, out.decode(), shown.decode()


@pytest.mark.parametrize(("answer", "code"), [(b"y", 0), (b"n", 1)])
def test_on_a_terminal_an_action_says_what_it_will_do_and_asks(
    db: str, answer: bytes, code: int
) -> None:
    hold_id = _first(db, "source_stale")
    returncode, out, shown = _answer_on_a_terminal(db, hold_id, answer)
    assert "The note is added to the hold's record." in shown
    assert "It will be recorded under operator erin." in shown and "Add a note? [y/N]" in shown
    assert returncode == code
    noted = _json(["holds", "--db", db, "--json", "--reason", "source_stale"])
    if code == 0:
        assert out == f"Hold {hold_id} noted by erin.\n"
    assert (noted[0]["version"] == 1) is (code == 0)
