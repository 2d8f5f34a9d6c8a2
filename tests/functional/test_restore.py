"""A ledger put back from a backup says so (``status``, ``doctor``, ``restored``, the terminal
UI) until a person acknowledges it, with a note, as an event under their name."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.domain.times import for_people
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store
from flowledger.storage.models import Execution, table
from flowledger.tui import make_app
from tests.support.builders import execution_row, req
from tests.support.cli import cli
from tests.support.ledgers import new_ledger
from tests.support.tui import settle


@pytest.fixture
def live(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.db"
    store = new_ledger(db)
    Ledger(store).dispatch("invoice:1", req("e1")).run("token:n8n")
    store.dispose()
    return db


def restore(backup: Path, to: Path) -> Path:
    """Put a backup back as an operator would: a plain copy of the file."""
    shutil.copyfile(backup, to)
    return to


@pytest.fixture
def put_back(live: Path, tmp_path: Path) -> tuple[Path, str]:
    """A ledger restored from a backup of ``live``, and the time the backup says it took."""
    code, out, err = cli("backup", str(tmp_path / "copy.db"), "--db", str(live))
    assert code == 0, err
    taken = out.split("backup taken at ")[1].split(" written")[0]
    return restore(tmp_path / "copy.db", tmp_path / "restored.db"), taken


def test_a_restored_ledger_says_so_until_acknowledged(put_back: tuple[Path, str]) -> None:
    db, taken = put_back
    code, out, _ = cli("status", "--db", str(db))
    assert code == 0 and out.startswith(f"RESTORED from a backup taken at {taken}: ")
    suggested = out.split("`flowledger executions --since ")[1].split("`")[0]
    assert suggested == taken.replace(" UTC", "Z").replace(" ", "T")
    for since in (suggested, taken):  # the command as printed, and the time as printed
        code, _, err = cli("executions", "--since", since, "--db", str(db))
        assert code == 0, err
    assert "flowledger restored --ack --note TEXT" in out
    status = json.loads(cli("status", "--json", "--db", str(db))[1])
    assert status["restored_from"].startswith(taken[:10])
    code, out, _ = cli("doctor", "--db", str(db))
    assert code == 0 and f"restored:        RESTORED from a backup taken at {taken}" in out
    code, out, _ = cli("restored", "--db", str(db))
    assert code == 1 and out.startswith(f"RESTORED from a backup taken at {taken}")

    code, _, err = cli("restored", "--ack", "--db", str(db))
    assert code == 2 and "--ack needs --note TEXT" in err
    for note in ("   ", "x" * 5000):
        code, out, err = cli("restored", "--ack", "--note", note, "--db", str(db))
        assert code == 2 and out == "" and err.count("\n") == 1 and "note" in err, err
    code, out, err = cli(
        "restored", "--ack", "--operator", "dana", "--note", "n8n executions since: none wrote",
        "--db", str(db),
    )  # fmt: skip
    assert code == 0, err
    assert out == f"restore from the backup taken at {taken} acknowledged by dana\n"

    code, out, _ = cli("status", "--db", str(db))
    assert code == 0 and "RESTORED" not in out
    assert cli("restored", "--db", str(db))[0] == 0
    last = json.loads(cli("export", "--db", str(db))[1].splitlines()[-1])
    assert (last["kind"], last["actor"]) == ("restore_acknowledged", "operator:dana")
    acked = for_people(datetime.fromisoformat(last["at"]))
    assert (
        f"restored:        no (restored from a backup taken at {taken}, acknowledged by dana "
        f"at {acked})\n"
    ) in cli("doctor", "--db", str(db))[1]
    assert last["data"]["note"] == "n8n executions since: none wrote"
    assert last["data"]["backup_taken_at"].startswith(taken[:10])
    assert cli("verify", "--deep", "--db", str(db))[0] == 0


def test_the_live_ledger_is_not_restored(live: Path) -> None:
    assert "restored:        no\n" in cli("doctor", "--db", str(live))[1]
    code, out, _ = cli("restored", "--db", str(live))
    assert code == 0 and out.startswith("not restored")
    code, _, err = cli("restored", "--ack", "--note", "x", "--db", str(live))
    assert code == 3 and "not restored from a backup" in err


def test_a_backup_of_a_restored_ledger_keeps_the_first_time(
    put_back: tuple[Path, str], tmp_path: Path
) -> None:
    db, taken = put_back
    assert cli("backup", str(tmp_path / "again.db"), "--db", str(db))[0] == 0
    again = restore(tmp_path / "again.db", tmp_path / "again-restored.db")
    assert f"RESTORED from a backup taken at {taken}" in cli("status", "--db", str(again))[1]


async def test_the_terminal_ui_marks_a_restored_ledger(put_back: tuple[Path, str]) -> None:
    db, taken = put_back
    store = open_store(str(db))
    try:
        tui = make_app(Ledger(store), operator="dana", refresh_seconds=None)
        async with tui.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "RESTORED" in tui.sub_title
            assert tui.last_message.startswith(f"RESTORED from a backup taken at {taken}")
            # Acknowledged while the UI is open: the mark goes at the next refresh.
            ack = ("restored", "--ack", "--note", "checked", "--db", str(db))
            assert cli(*ack)[0] == 0
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert tui.sub_title == "operator dana"
    finally:
        store.dispose()


def test_executions_since_lists_only_those_started_then_or_later(live: Path) -> None:
    t0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    store = open_store(str(live))
    try:
        with store.engine.begin() as conn:
            conn.execute(
                sa.insert(table(Execution)),
                [
                    execution_row(str(n), "success", started_at=t0 + timedelta(minutes=n))
                    for n in (1, 2, 3)
                ],
            )
    finally:
        store.dispose()
    code, out, _ = cli("executions", "--since", "2026-11-02T09:02:00Z", "--json", "--db", str(live))
    assert code == 0
    assert [e["external_id"] for e in json.loads(out)] == ["3", "2"]
