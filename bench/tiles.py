"""C2SP tiles of a large ledger: ``flowledger tiles DIR`` from nothing, then extended after
more events, and the root recomputed from the files alone.

``python -m bench.tiles [--events M] [--more K]``:

1. A SQLite ledger of M events (default 1,000,000) built by bulk inserts
   (:func:`bench.proofs.build_large`: every event sealed into the chain and every perfect
   subtree made by the ledger's own functions).
2. The wall and CPU time of writing its tiles directory (:func:`flowledger.reports.tiles.
   write_tiles`, what the command runs), with the files and bytes written.
3. K more events (default 10,000) appended through the services (dispatches in group commits
   of 50: the write path, the tree extended as it goes), then the time of extending the
   directory, and what that wrote.
4. The root of the tree at the directory's checkpoint recomputed from the tile files alone
   (:func:`flowledger.domain.tiles.root_from_tiles` reading only the files), compared with the
   signed checkpoint's root, and the time that takes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench.proofs import build_large
from bench.verify import request
from flowledger.domain.checkpoints import open_checkpoint
from flowledger.domain.tiles import Tile, root_from_tiles, tile_hashes
from flowledger.reports.tiles import write_tiles
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import open_store
from flowledger.storage.reads.tree_proofs import ledger_origin

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float, float]:
    """``fn()``, its wall seconds and this process's CPU seconds."""
    started, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - started, time.process_time() - cpu


def folder_size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--more", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        db, tiles = work / "large.db", work / "tiles"
        _, built, _ = timed(lambda: build_large(db, args.events))
        print(f"built a ledger of {args.events:,} events by bulk inserts in {built:.1f} s")
        store = open_store(str(db))
        signer = create_key(work / "tiles.key", ledger_origin(store))
        done, wall, cpu = timed(lambda: write_tiles(store, signer, tiles))
        count, size = folder_size(tiles)
        print(
            f"tiles from nothing: {done.size:,} events, {done.tiles:,} tile files "
            f"({count:,} files, {size / 1e6:.1f} MB in all) in {wall:.1f} s wall, {cpu:.1f} s CPU"
        )
        ledger = Ledger(store)
        _, appended, _ = timed(
            lambda: [
                ledger.run_many(
                    [
                        ("token:bench", ledger.dispatch(f"more:{n}", request(f"more:{n}")).work)
                        for n in range(start, min(args.more, start + 50))
                    ]
                )
                for start in range(0, args.more, 50)
            ]
        )
        print(f"appended {args.more:,} events through the services in {appended:.1f} s")
        done, wall, cpu = timed(lambda: write_tiles(store, signer, tiles))
        print(
            f"tiles extended: {done.old_size:,} -> {done.size:,} events, {done.tiles} tile "
            f"files written in {wall:.2f} s wall, {cpu:.2f} s CPU"
        )
        store.dispose()
        cp = open_checkpoint((tiles / "checkpoint").read_text(), signer.verifier)

        def hashes_at(level: int, index: int, width: int) -> list[bytes]:
            tile = Tile(level, index, width)
            return tile_hashes((tiles / tile.path()).read_bytes(), tile)

        root, wall, _ = timed(lambda: root_from_tiles(cp.size, hashes_at))
        verdict = "EQUAL to" if root == cp.root else "DIFFERENT from"
        print(
            f"root at {cp.size:,} events from the tile files alone ({wall * 1e3:.1f} ms): "
            f"{root.hex()}, {verdict} the signed checkpoint's"
        )
        if root != cp.root:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
