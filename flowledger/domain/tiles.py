"""The log as C2SP ``tlog-tiles``: the tree's hashes cut into tiles of 256 that never change
once full, and the leaves' inputs in entry bundles beside them, so that anyone can fetch the log
as static files and check it with tools nobody here wrote. Pure functions, the standard library
only (the auditor's verifier in ``flowledger/programs/bundle_verifier.py`` does the same by
hand).

A tile at level ``L``, index ``N`` holds the hashes of the tree at height ``8 * L`` (level 0:
the leaf hashes), numbers ``256 * N`` up to ``256 * N + 255``, 32 bytes each, concatenated. A
tile is *full* with 256 hashes and then never changes; the last tile of a level is *partial*
(``W`` hashes, ``tile/L/N.p/W``) until the tree grows past it. An entry bundle
(``tile/entries/N``) holds the inputs of those leaves, each as a big-endian two-byte length and
the bytes. Paths write ``N`` in groups of three digits, all but the last led by ``x``:
``1234067`` is ``x001/x234/067``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from flowledger.domain import merkle

WIDTH = 256  # hashes in a full tile
HEIGHT = 8  # tree levels a tile spans: WIDTH == 2**HEIGHT
MAX_LEVEL = 63 // HEIGHT  # a tile above it would hold subtrees of more than 2**63 leaves
_GROUP = re.compile(r"^(x\d{3}/)*\d{3}$")


class TileError(ValueError):
    """A tile path or tile that is malformed; the message says which and why."""


@dataclass(frozen=True)
class Tile:
    """A tile's place: its level (``None``: the entry bundle of level 0's tile), its index,
    and its width (``WIDTH`` when full)."""

    level: int | None
    index: int
    width: int

    @property
    def full(self) -> bool:
        return self.width == WIDTH

    def path(self) -> str:
        name = "entries" if self.level is None else str(self.level)
        tail = "" if self.full else f".p/{self.width}"
        return f"tile/{name}/{index_path(self.index)}{tail}"

    @property
    def height(self) -> int:
        """The tree level the tile's hashes are at (its entries: the leaves')."""
        return 0 if self.level is None else self.level * HEIGHT


def index_path(index: int) -> str:
    """``index`` as tile paths write it: ``x001/x234/067``."""
    if index < 0:
        raise TileError(f"a tile index is not negative ({index})")
    digits = f"{index:03d}"
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*(f"x{g}" for g in groups[:-1]), groups[-1]])


def parse_tile_path(path: str) -> Tile:
    """The tile a request's path (after the log's prefix) names: ``tile/L/N[.p/W]`` or
    ``tile/entries/N[.p/W]``, written exactly as :meth:`Tile.path` writes it (no other spelling
    of one tile, no ``..``, no empty or extra parts); a :class:`TileError` otherwise."""
    if len(path) > 120 or not path.isascii():
        raise TileError("not a tile path")
    head, sep, rest = path.partition("/")
    name, sep2, rest = rest.partition("/")
    if head != "tile" or not sep or not sep2:
        raise TileError("a tile path reads tile/LEVEL/INDEX[.p/WIDTH]")
    width = WIDTH
    index_text, dotp, width_text = rest.partition(".p/")
    if dotp:
        if not width_text.isdigit() or not 1 <= int(width_text) < WIDTH:
            raise TileError(f"a partial tile's width is 1 to {WIDTH - 1}")
        width = int(width_text)
    if not _GROUP.match(index_text):
        raise TileError("a tile index is written in groups of three digits (x001/x234/067)")
    index = int(index_text.replace("x", "").replace("/", ""))
    if name == "entries":
        level = None
    elif name.isdigit() and len(name) <= 2 and int(name) <= MAX_LEVEL:
        level = int(name)
    else:
        raise TileError(f"a tile level is entries or 0 to {MAX_LEVEL}")
    tile = Tile(level, index, width)
    if tile.path() != path:
        raise TileError(f"not the way a tile path is written: {tile.path()}")
    return tile


def tiles_of(size: int) -> Iterator[Tile]:
    """Every tile (and entry bundle) of the tree of ``size`` leaves, level by level: full ones
    and each level's partial one."""
    yield from tiles_between(0, size)


def tiles_between(old: int, new: int) -> Iterator[Tile]:
    """The tiles the tree of ``new`` leaves has that the tree of ``old`` leaves has not (a
    partial tile that grew comes again, wider): what an extension writes."""
    level = 0
    while (new >> (level * HEIGHT)) > 0:
        count, before = new >> (level * HEIGHT), old >> (level * HEIGHT)
        for index in range(before // WIDTH, (count + WIDTH - 1) // WIDTH):
            width = min(WIDTH, count - index * WIDTH)
            had = min(WIDTH, max(0, before - index * WIDTH))
            if width == had:
                continue
            yield Tile(level, index, width)
            if level == 0:
                yield Tile(None, index, width)
        level += 1


def tile_hashes(data: bytes, tile: Tile) -> list[bytes]:
    """The hashes a tile's bytes hold; a :class:`TileError` unless there are ``width``."""
    if len(data) != 32 * tile.width:
        raise TileError(f"{tile.path()} holds {len(data)} bytes, not {32 * tile.width}")
    return [data[i : i + 32] for i in range(0, len(data), 32)]


def entry_bundle(entries: list[bytes]) -> bytes:
    """Entries as a bundle writes them: each a big-endian two-byte length, then its bytes."""
    out = bytearray()
    for entry in entries:
        if len(entry) > 0xFFFF:
            raise TileError(f"an entry of {len(entry)} bytes is longer than a bundle holds")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def bundle_entries(data: bytes) -> list[bytes]:
    """The entries of a bundle's bytes (:func:`entry_bundle`'s inverse)."""
    out, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise TileError("an entry bundle ends inside an entry's length")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise TileError("an entry bundle ends inside an entry")
        out.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return out


def root_from_tiles(size: int, hashes_at: Callable[[int, int, int], list[bytes]]) -> bytes:
    """The root of the tree of ``size`` leaves from tiles alone: ``hashes_at(level, index,
    width)`` gives a tile's hashes (from files, a server, anything). Each perfect subtree of
    the tree's right edge is read from the tile at or below its height and folded up."""
    hashes = []
    for height, idx in merkle.compact_range(size):
        level = height // HEIGHT
        below = height - level * HEIGHT  # the subtree spans 2**below hashes of its tile
        first = idx << below
        tile_index = first // WIDTH
        width = min(WIDTH, (size >> (level * HEIGHT)) - tile_index * WIDTH)
        got = hashes_at(level, tile_index, width)
        start = first - tile_index * WIDTH
        hashes.append(merkle.root_of(got[start : start + (1 << below)]))
    return merkle.fold(hashes)
