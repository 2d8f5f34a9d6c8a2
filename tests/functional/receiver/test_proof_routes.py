"""The proof routes: a read token gets the signed checkpoint and an operation's proof file,
which the standalone verifier accepts; without a signing key both say so."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import Signer, open_checkpoint
from flowledger.programs.verify_proof import main as verify_main
from flowledger.services.ledger import Ledger
from tests.support.builders import dispatch_body
from tests.support.receiver import Api


def test_a_read_token_gets_a_checkpoint_and_a_proof_that_verifies(
    signing_api: Api, signer: Signer, tmp_path: Path
) -> None:
    signing_api.post("/v1/operations/op/1/dispatch", dispatch_body())
    signing_api.post("/v1/operations/op/1/confirm", {"receipt": "R-1"})
    answer = signing_api.get("/v1/checkpoint")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    cp = open_checkpoint(body["checkpoint"], signer.verifier)
    assert (body["origin"], body["size"]) == (cp.origin, cp.size) and cp.origin == signer.name
    proof = signing_api.get("/v1/operations/op/1/proof")
    assert proof.status_code == 200, proof.text
    assert [e["kind"] for e in proof.json()["events"]] == ["dispatched", "confirmed"]
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(proof.json()))
    assert verify_main([str(path), "--key", signer.verifier.text()]) == 0
    missing = signing_api.get("/v1/operations/nope/proof")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert signing_api.get("/v1/checkpoint", token="write").status_code == 403
    assert signing_api.get("/v1/checkpoint", token=None).status_code == 401


def test_without_a_signing_key_the_routes_say_so(api: Api) -> None:
    api.post("/v1/operations/op-1/dispatch", dispatch_body())
    for path in ("/v1/checkpoint", "/v1/operations/op-1/proof"):
        answer = api.get(path)
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "no_signing_key"


def test_the_checkpoint_comes_with_the_cosignatures_its_witnesses_gave(
    signing_api: Api, ledger: Ledger, signer: Signer, tmp_path: Path
) -> None:
    from flowledger.domain.cosignatures import Cosigner
    from flowledger.storage import witnesses as kept
    from flowledger.storage.reads.chain import snapshot
    from flowledger.storage.reads.tree_proofs import tree_head
    from tests.support.builders import T0

    signing_api.post("/v1/operations/op/1/dispatch", dispatch_body())
    with snapshot(ledger.store) as conn:
        cp = tree_head(conn)
    witness = Cosigner("witness.example/w1", Ed25519PrivateKey.generate())
    line = witness.cosign(cp.text(), 1_800_000_000)
    checkpoint_id = kept.record_checkpoint(ledger.store, cp, signer.sign(cp.text()), T0)
    vkey = witness.verifier.text()
    kept.cosigned(ledger.store, checkpoint_id, vkey, "http://w", cp.size, (line, 1), T0)
    note = signing_api.get("/v1/checkpoint").json()["checkpoint"]
    assert note.endswith(line)
    proof = signing_api.get("/v1/operations/op/1/proof").json()
    assert proof["checkpoint"] == note
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(proof))
    args = [str(path), "--key", signer.verifier.text(), "--witness", vkey]
    assert verify_main(args) == 0
    signing_api.post("/v1/operations/op/2/dispatch", dispatch_body())
    assert signing_api.get("/v1/checkpoint").json()["checkpoint"].count("\u2014") == 1
