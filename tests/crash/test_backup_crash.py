"""A backup killed after its copy is written and checked, before it is renamed: nothing is
under DEST's name, the ledger is untouched, and the next backup to that name says what is
left over rather than write beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowledger.services.ledger import Ledger
from tests.support.builders import req
from tests.support.cli import cli
from tests.support.ledgers import new_ledger
from tests.support.processes import env_for, kill_at

pytestmark = pytest.mark.crash


def test_a_backup_killed_before_its_rename_leaves_nothing_under_its_name(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    store = new_ledger(db)
    Ledger(store).dispatch("op-1", req()).run("wf")
    store.dispose()
    dest = tmp_path / "copy.db"
    (tmp_path / "flowledger.toml").write_text("")
    env = env_for(str(db), tmp_path / "flowledger.toml")

    kill_at("backup_before_rename", ["backup", str(dest)], env, tmp_path)

    assert not dest.exists()
    left = tmp_path / ".copy.db.partial"
    assert left.stat().st_mode & 0o777 == 0o600
    code, _, err = cli("backup", str(dest), "--db", str(db))
    assert code == 2 and not dest.exists()
    assert f"{left} exists: another backup is writing, or one was killed" in err
    left.unlink()
    assert cli("backup", str(dest), "--db", str(db))[0] == 0
    code, out, _ = cli("verify", "--db", str(db))
    assert code == 0 and "chain ok: 1 event" in out
