"""The log over HTTP for read tokens: C2SP tiles under ``/v1/tlog/`` (full tiles cacheable
forever, the root recomputed from served tiles alone), events proven by their number, and
consistency proofs between two sizes; every malformed path, number and size refused in one
line."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain import merkle
from flowledger.domain.checkpoints import Signer, open_checkpoint
from flowledger.domain.cosignatures import Cosigner
from flowledger.domain.tiles import Tile, root_from_tiles, tile_hashes
from flowledger.programs.verify_proof import main as verify_main
from flowledger.reports.tiles import write_tiles
from flowledger.services.ledger import Ledger
from flowledger.storage import witnesses as kept
from flowledger.storage.reads.chain import snapshot
from flowledger.storage.reads.tree_proofs import tree_head
from tests.support.builders import req
from tests.support.receiver import Api

WF = "token:n8n"


def grow(ledger: Ledger, count: int, prefix: str = "op") -> None:
    ledger.run_many(
        [(WF, ledger.dispatch(f"{prefix}-{i}", req(f"{prefix}-e{i}")).work) for i in range(count)]
    )


def test_tiles_served_give_the_checkpoints_root(
    signing_api: Api, ledger: Ledger, signer: Signer
) -> None:
    grow(ledger, 260)
    answer = signing_api.get("/v1/tlog/checkpoint")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-cache"
    cp = open_checkpoint(answer.text, signer.verifier)
    assert cp.size == 262  # two token events, then the dispatches

    def hashes_at(level: int, index: int, width: int) -> list[bytes]:
        tile = Tile(level, index, width)
        got = signing_api.get(f"/v1/tlog/{tile.path()}")
        assert got.status_code == 200, (tile.path(), got.text)
        expected = "max-age=31536000, immutable" if tile.full else "no-cache"
        assert got.headers["cache-control"] == expected
        return tile_hashes(got.content, tile)

    assert root_from_tiles(cp.size, hashes_at) == cp.root
    # A partial tile narrower than the tree's is still the first hashes of its tile.
    narrow = signing_api.get("/v1/tlog/tile/0/001.p/3")
    wide = signing_api.get("/v1/tlog/tile/0/001.p/6")
    assert narrow.status_code == wide.status_code == 200
    assert wide.content.startswith(narrow.content) and len(narrow.content) == 96
    assert signing_api.get("/v1/tlog/tile/entries/000").status_code == 200
    assert signing_api.get("/v1/tlog/tile/0/000", token="write").status_code == 403
    assert signing_api.get("/v1/tlog/tile/0/000", token=None).status_code == 401


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/001",  # not full yet
        "tile/0/001.p/7",  # wider than the tree
        "tile/2/000.p/1",  # above the tree
        "tile/0/x000/000",  # a second spelling of tile 0
        "tile/0/0",
        "tile/0/0000",
        "tile/0/001/",
        "tile/0/000.p/0",
        "tile/0/000.p/256",
        "tile/0/000.p/-1",
        "tile/0/000.p/01",
        "tile/00/000",
        "tile/8/000",
        "tile/-1/000",
        "tile/0/%2e%2e/000",
        "tile/0/..%2f..%2f000",
        "tile/0/x999/x999/x999/x999/x999/x999/x999/999",
        "tile/0/" + "x123/" * 40 + "000",
        "tile/%C2%B2/000",
        "tile/\u0660/000",
        "tile/0/\u0660\u0660\u0660",
        "tile/",
    ],
)
def test_a_path_that_is_no_tile_of_the_tree_is_a_404_in_one_line(
    signing_api: Api, ledger: Ledger, path: str
) -> None:
    grow(ledger, 260)
    answer = signing_api.get(f"/v1/tlog/{path}")
    assert answer.status_code == 404, (path, answer.text)
    error = answer.json()["error"]
    assert error["code"] in ("not_a_tile", "not_found") and "\n" not in error["message"]


def test_events_are_proven_by_number_over_http(
    signing_api: Api, ledger: Ledger, signer: Signer, tmp_path: Path
) -> None:
    grow(ledger, 3)
    answer = signing_api.get("/v1/events/1/proof")
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["range"] == [1, 1] and doc["events"][0]["kind"] == "token_created"
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(doc))
    assert verify_main([str(path), "--key", signer.verifier.text()]) == 0
    doc = signing_api.get("/v1/events/2/proof", params={"last": 5}).json()
    assert [e["seq"] for e in doc["events"]] == [2, 3, 4, 5]
    path.write_text(json.dumps(doc))
    assert verify_main([str(path), "--key", signer.verifier.text()]) == 0


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/events/0/proof", 422),
        ("/v1/events/-1/proof", 422),
        ("/v1/events/abc/proof", 422),
        ("/v1/events/1e3/proof", 422),
        ("/v1/events/99999999999999999999999/proof", 422),
        ("/v1/events/9223372036854775807/proof", 404),
        ("/v1/events/%D9%A3/proof", 422),
        ("/v1/events/3/proof?last=2", 404),
        ("/v1/events/1/proof?last=100001", 404),
        ("/v1/events/1/proof?last=99", 404),
        ("/v1/events/1/proof?last=%C2%B2", 422),
        ("/v1/events/1/proof?last=2.0", 422),
        ("/v1/events/+1/proof", 422),
    ],
)
def test_an_event_number_that_is_none_of_the_log_is_refused(
    signing_api: Api, ledger: Ledger, path: str, status: int
) -> None:
    grow(ledger, 3)
    answer = signing_api.get(path)
    assert answer.status_code == status, (path, answer.text)
    assert "\n" not in answer.json()["error"]["message"]


def test_consistency_between_two_sizes_checks_out(signing_api: Api, ledger: Ledger) -> None:
    grow(ledger, 5, "a")
    old_cp = signing_api.get("/v1/checkpoint").json()
    grow(ledger, 9, "b")
    new_cp = signing_api.get("/v1/checkpoint").json()
    for old in (0, 1, 4, old_cp["size"]):
        answer = signing_api.get("/v1/consistency", params={"old": old, "new": new_cp["size"]})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["new_root"] == new_cp["root"]
        proof = [base64.b64decode(h) for h in body["consistency"]]
        merkle.verify_consistency(
            old,
            new_cp["size"],
            base64.b64decode(body["old_root"]),
            base64.b64decode(new_cp["root"]),
            proof,
        )
    body = signing_api.get(
        "/v1/consistency", params={"old": old_cp["size"], "new": new_cp["size"]}
    ).json()
    assert body["old_root"] == old_cp["root"]


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("old=5&new=2", 404),
        ("old=0&new=999", 404),
        ("old=-1&new=2", 422),
        ("old=1", 422),
        ("old=1&new=x", 422),
        ("old=1&new=99999999999999999999999", 422),
        ("old=%D9%A1&new=2", 422),
        ("old=1&new=2.0", 422),
        ("old=+1&new=2", 422),
        ("old=1&new=%202", 422),
    ],
)
def test_a_consistency_request_between_sizes_the_log_never_had_is_refused(
    signing_api: Api, ledger: Ledger, query: str, status: int
) -> None:
    grow(ledger, 3)
    answer = signing_api.get(f"/v1/consistency?{query}")
    assert answer.status_code == status, (query, answer.text)
    assert "\n" not in answer.json()["error"]["message"]


def test_without_a_signing_key_the_tiles_say_so(api: Api) -> None:
    for path in ("/v1/tlog/checkpoint", "/v1/tlog/tile/0/000.p/1", "/v1/events/1/proof"):
        answer = api.get(path)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "no_signing_key"


def test_the_tiles_checkpoint_carries_the_witnesses_cosignatures(
    signing_api: Api, ledger: Ledger, signer: Signer, tmp_path: Path
) -> None:
    """As ``/v1/checkpoint``: the cosignatures kept for that exact checkpoint, over HTTP and
    in the ``checkpoint`` file ``flowledger tiles`` writes."""
    grow(ledger, 3)
    with snapshot(ledger.store) as conn:
        cp = tree_head(conn)
    note = signer.sign(cp.text())
    witness = Cosigner("witness.example/w1", Ed25519PrivateKey.generate())
    line = witness.cosign(cp.text(), 1_800_000_000)
    now = datetime(2026, 12, 6, tzinfo=UTC)
    checkpoint_id = kept.record_checkpoint(ledger.store, cp, note, now)
    kept.cosigned(
        ledger.store,
        checkpoint_id,
        witness.verifier.text(),
        "http://w.test",
        cp.size,
        (line, 1_800_000_000),
        now,
    )
    assert signing_api.get("/v1/tlog/checkpoint").text == note + line
    assert signing_api.get("/v1/checkpoint").json()["checkpoint"] == note + line
    write_tiles(ledger.store, signer, tmp_path / "tiles")
    assert (tmp_path / "tiles" / "checkpoint").read_text() == note + line
    # Once the log grows, the new head has no cosignature yet: the log's signature alone.
    grow(ledger, 1, "later")
    assert signing_api.get("/v1/tlog/checkpoint").text.count("\u2014 ") == 1
