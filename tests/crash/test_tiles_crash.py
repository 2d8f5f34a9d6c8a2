"""``flowledger tiles`` killed while it extends a directory: the directory still holds the old
checkpoint and every tile it needs (its root from the files alone is the signed one), and the
next run finishes the extension as if nothing had happened."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flowledger.domain.checkpoints import open_checkpoint
from flowledger.domain.tiles import Tile, root_from_tiles, tile_hashes
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import Store
from flowledger.storage.reads.tree_proofs import ledger_origin
from tests.support.builders import FakeClock, req
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for, kill_at

pytestmark = pytest.mark.crash


def root_of_folder(folder: Path, size: int) -> bytes:
    def hashes_at(level: int, index: int, width: int) -> list[bytes]:
        tile = Tile(level, index, width)
        return tile_hashes((folder / tile.path()).read_bytes(), tile)

    return root_from_tiles(size, hashes_at)


@pytest.mark.parametrize(
    ("point", "skip"), [("tiles_tile_written", 3), ("tiles_before_checkpoint", 0)]
)
def test_a_killed_extension_leaves_the_old_checkpoint_whole_and_the_next_run_finishes(
    store: Store, db_url: str, tmp_path: Path, point: str, skip: int
) -> None:
    key = tmp_path / "checkpoint.key"
    signer = create_key(key, ledger_origin(store))
    config = tmp_path / "flowledger.toml"
    config.write_text(f'[checkpoints]\nkey = "{key}"\n')
    env = env_for(db_url, config)
    ledger = Ledger(store, clock=FakeClock())
    ledger.run_many([("t", ledger.dispatch(f"op-{i}", req(f"e{i}")).work) for i in range(300)])
    folder = tmp_path / "tiles"
    first = subprocess.run(
        [FLOWLEDGER, "tiles", str(folder)], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert first.returncode == 0, first.stderr
    ledger.run_many([("t", ledger.dispatch(f"more-{i}", req(f"m{i}")).work) for i in range(230)])

    kill_at(point, ["tiles", str(folder)], {**env, "FLOWLEDGER_CRASH_SKIP": str(skip)}, tmp_path)
    cp = open_checkpoint((folder / "checkpoint").read_text(), signer.verifier)
    assert cp.size == 300 and root_of_folder(folder, 300) == cp.root

    again = subprocess.run(
        [FLOWLEDGER, "tiles", str(folder)], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert again.returncode == 0 and "530 events (was 300)" in again.stdout, again.stderr
    cp = open_checkpoint((folder / "checkpoint").read_text(), signer.verifier)
    assert cp.size == 530 and root_of_folder(folder, 530) == cp.root
