"""The ledger's files are its owner's alone, whatever the umask: the database, its ``-wal`` and
``-shm``, and the directory ``init`` creates for them; ``doctor`` warns about a ledger others
can read."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app as _app  # noqa: F401  (registers the commands)
from flowledger.cli.common import app
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger
from tests.support.builders import req


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_init_creates_the_database_its_wal_and_shm_and_var_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "var" / "flowledger.db"
    store, created = init_ledger(str(db))
    try:
        Ledger(store).dispatch("op-1", req()).run("workflow")
        files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
        assert created and all(f.exists() for f in files)
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert mode(db.parent) == 0o700
    finally:
        store.dispose()


@pytest.mark.usefixtures("umask_022")
def test_doctor_warns_when_others_can_read_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "flowledger.toml"
    config.write_text("")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    db = tmp_path / "ledger.db"
    init_ledger(str(db))[0].dispose()
    private = CliRunner().invoke(app, ["doctor", "--db", str(db)])
    assert private.exit_code == 0 and "file modes:      owner only" in private.output
    db.chmod(0o644)
    shared = CliRunner().invoke(app, ["doctor", "--db", str(db)])
    assert shared.exit_code == 0
    assert "WARNING: readable by others: ledger.db (0644)" in shared.output
