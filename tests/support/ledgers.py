"""New ledgers without running the migrations: a SQLite ledger migrated once per test process
is copied, and the copy given an identity of its own, as ``flowledger init`` gives a new ledger
(the ``store`` fixture's ledgers are made so too). The migrations run for real in the tests of
migrations and of ``init``."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import uuid
from pathlib import Path

import sqlalchemy as sa

from flowledger.domain.hashing import genesis_hash
from flowledger.storage.engine import Store, sqlite_files
from flowledger.storage.migrate import init_ledger

_template: Path | None = None


def sqlite_template() -> Path:
    """A SQLite ledger migrated once for this test process (removed when it ends)."""
    global _template
    if _template is None:
        folder = Path(tempfile.mkdtemp(prefix="flowledger-template-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "ledger.db"
        init_ledger(str(path))[0].dispose()
        _template = path
    return _template


def copy_template(path: Path) -> None:
    """The template's files copied to ``path`` (a ledger not yet made there), with their mode
    (0600)."""
    for source, copy in zip(sqlite_files(sqlite_template()), sqlite_files(path), strict=True):
        if source.exists():
            shutil.copy(source, copy)


def new_identity(store: Store) -> None:
    """Give a copied, still empty ledger a random identity of its own, as migration 0005 gives
    a new ledger: its ``ledger_id``, and the genesis its chain starts from."""
    ledger_id = str(uuid.uuid4())
    genesis = genesis_hash(ledger_id)
    with store.engine.begin() as conn:
        assert conn.execute(sa.text("SELECT seq FROM chain_head WHERE id = 1")).scalar_one() == 0
        conn.execute(
            sa.text("UPDATE ledger_meta SET value = :v WHERE key = :k"),
            [{"k": "ledger_id", "v": ledger_id}, {"k": "genesis", "v": genesis}],
        )
        conn.execute(sa.text("UPDATE chain_head SET hash = :g WHERE id = 1"), {"g": genesis})


def new_ledger(path: str | Path) -> Store:
    """A new, empty SQLite ledger at ``path`` (nothing there yet), as ``init_ledger`` would
    make it, opened: the template's copy with an identity of its own."""
    path = Path(path)
    assert not path.exists(), f"{path} is already there"
    copy_template(path)
    store, created = init_ledger(str(path))
    assert not created
    new_identity(store)
    return store
