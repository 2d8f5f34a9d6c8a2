"""C2SP tile paths and tiles, pure: paths spelled one way only, the tiles an extension writes,
and the root of any tree recomputed from its tiles."""

from __future__ import annotations

import hashlib

import pytest

from flowledger.domain import merkle
from flowledger.domain.tiles import (
    WIDTH,
    Tile,
    TileError,
    bundle_entries,
    entry_bundle,
    index_path,
    parse_tile_path,
    root_from_tiles,
    tiles_between,
    tiles_of,
)


@pytest.mark.parametrize(
    ("index", "path"),
    [(0, "000"), (7, "007"), (999, "999"), (1000, "x001/000"), (1234067, "x001/x234/067")],
)
def test_an_index_is_written_in_groups_of_three(index: int, path: str) -> None:
    assert index_path(index) == path
    tile = Tile(3, index, 5)
    assert parse_tile_path(tile.path()) == tile
    assert parse_tile_path(f"tile/entries/{path}") == Tile(None, index, WIDTH)


@pytest.mark.parametrize(
    "path",
    ["tile/0/x000/001", "tile/0/01", "tile/0/000.p/256", "tile/0/000.p/0", "tile/01/000",
     "tile/0/000/", "tile//000", "tile/0/../000", "tile/0/000.p/", "tile/0/\u0661\u0661\u0661",
     "tile/0/000.p/\u00b2", "tile/8/000", "tiles/0/000", "tile/0/x1000/000", "tile/0/-01"],
)  # fmt: skip
def test_any_other_spelling_is_no_tile(path: str) -> None:
    with pytest.raises(TileError):
        parse_tile_path(path)


def leaves(n: int) -> list[bytes]:
    return [merkle.leaf_hash(hashlib.sha256(str(i).encode()).digest()) for i in range(n)]


def level_hashes(all_leaves: list[bytes], height: int) -> list[bytes]:
    """The perfect subtrees of ``2**height`` leaves, left to right."""
    step = 1 << height
    return [
        merkle.root_of(all_leaves[i : i + step]) for i in range(0, len(all_leaves) - step + 1, step)
    ]


@pytest.mark.parametrize("size", [1, 2, 3, 255, 256, 257, 511, 512, 1000, 65536, 65537, 70001])
def test_the_root_from_tiles_is_the_trees(size: int) -> None:
    all_leaves = leaves(size)
    cache: dict[int, list[bytes]] = {}

    def hashes_at(level: int, index: int, width: int) -> list[bytes]:
        hashes = cache.setdefault(level, level_hashes(all_leaves, 8 * level))
        assert len(hashes) >= index * WIDTH + width  # the tree has the whole tile
        return hashes[index * WIDTH : index * WIDTH + width]

    assert root_from_tiles(size, hashes_at) == merkle.root_of(all_leaves)


def test_an_extension_writes_what_grew_and_nothing_twice() -> None:
    assert [t.path() for t in tiles_of(3)] == ["tile/0/000.p/3", "tile/entries/000.p/3"]
    grown = [t.path() for t in tiles_between(300, 70000)]
    assert "tile/0/000" not in grown and "tile/0/001" in grown
    assert "tile/1/000.p/1" not in grown and "tile/1/000" in grown
    assert "tile/2/000.p/1" in grown and "tile/0/273.p/112" in grown
    assert list(tiles_between(530, 530)) == []
    # Every tile of the bigger tree is written by one of the two runs.
    together = {t.path() for t in tiles_of(300)} | set(grown)
    assert {t.path() for t in tiles_of(70000)} <= together


def test_an_entry_bundle_reads_back() -> None:
    entries = [b"", b"a", bytes(32), b"x" * 300]
    assert bundle_entries(entry_bundle(entries)) == entries
    with pytest.raises(TileError):
        bundle_entries(b"\x00\x05abc")
    with pytest.raises(TileError):
        entry_bundle([b"x" * 70000])
