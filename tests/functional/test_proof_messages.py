"""What an auditor or an operator is told when they give the proofs' commands and verifiers
the wrong thing: one line that says what it is and what to give instead."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import Signer
from flowledger.programs.verify_proof import main as verify_main
from flowledger.services.ledger import Ledger
from flowledger.services.signing import load_signer
from flowledger.storage.problems import LedgerError
from tests.support.builders import FakeClock, req
from tests.support.cli import cli
from tests.support.ledgers import new_ledger


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A ledger of one operation, its key, a proof file, a checkpoint and a bundle."""
    db = tmp_path / "ledger.db"
    store = new_ledger(db)
    Ledger(store, clock=FakeClock()).dispatch("invoice:1", req("exec-1")).run("token:n8n")
    store.dispose()
    assert cli("key", "create", str(tmp_path / "log.key"), "--db", str(db))[0] == 0
    assert cli("witness", "key", "create", str(tmp_path / "w.key"), "--name", "w.example/1")[0] == 0
    config = tmp_path / "flowledger.toml"
    config.write_text(f'[checkpoints]\nkey = "{tmp_path / "log.key"}"\n')
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    code, _, err = cli("proof", "invoice:1", "--db", str(db), "--out", str(tmp_path / "p.json"))
    assert code == 0, err
    code, note, err = cli("checkpoint", "--db", str(db))
    assert code == 0, err
    (tmp_path / "cp.txt").write_text(note)
    code, _, err = cli("bundle", "invoice:1", "--db", str(db), "--out", str(tmp_path / "b"))
    assert code == 0, err
    return {"db": db, "dir": tmp_path}


def test_verify_proof_names_what_it_was_given(
    made: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    d = made["dir"]
    pub, proof = str(d / "log.key.pub"), str(d / "p.json")
    capsys.readouterr()
    doc = json.loads((d / "p.json").read_text())
    del doc["checkpoint"]
    (d / "bare.json").write_text(json.dumps(doc))
    assert verify_main([str(d / "bare.json"), "--key", pub]) == 1
    said = capsys.readouterr().out
    assert "the proof file has no checkpoint" in said and "checkpoint checkpoint" not in said
    assert verify_main([str(d / "cp.txt"), "--key", pub]) == 2
    said = capsys.readouterr().err
    assert "is not a proof file (not JSON): it reads as a checkpoint" in said
    assert "Expecting value" not in said
    assert verify_main([proof, "--key", str(d / "log.key")]) == 2
    assert "log.key is a private key: give its verifier key, the .pub file" in (
        capsys.readouterr().err
    )
    assert verify_main([proof, "--key", str(d / "w.key.pub")]) == 2
    assert "--key is a witness's key (type 0x04): --key wants the log's" in (
        capsys.readouterr().err
    )
    args = [proof, "--key", pub, "--witness", str(d / "w.key.pub"), "--quorum", "0"]
    assert verify_main(args) == 2
    assert "--quorum 0 checks no witness's cosignature" in capsys.readouterr().err
    assert verify_main([proof, "--key", pub]) == 0


def test_verify_bundle_says_one_event_and_names_its_folder(
    made: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = made["dir"] / "b"
    verifier = runpy.run_path(str(bundle / "verify_bundle.py"))
    capsys.readouterr()
    assert verifier["main"]([str(bundle)]) == 0
    said = capsys.readouterr().out
    assert "bundle ok: 1 event in " in said and " 1 events" not in said
    with pytest.raises(SystemExit):
        verifier["main"](["--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "folder the bundle's folder (default: the folder this script is in)" in said
    other = made["dir"] / "w.key.pub"  # a key of another name, as the log's
    vkey = other.read_text().strip().replace("+", "+", 1)
    name = vkey.split("+")[0]
    checkpoint = (bundle / "checkpoint").read_text()
    origin = checkpoint.split("\n")[0]
    (bundle / "checkpoint").write_text(checkpoint.replace(origin, name, 1))
    capsys.readouterr()
    assert verifier["main"]([str(bundle)]) == 1
    said = capsys.readouterr().out
    assert f"the checkpoint is of '{name}', but the key is named '{origin}'" in said
    assert "''s" not in said


def test_a_public_key_as_the_signing_key_is_named_so(made: dict[str, Path]) -> None:
    pub = made["dir"] / "log.key.pub"
    pub.chmod(0o644)
    with pytest.raises(LedgerError, match=r"is a public \(verifier\) key: give the private key"):
        load_signer(pub, "x")
    config = made["dir"] / "flowledger.toml"
    config.write_text(f'[checkpoints]\nkey = "{pub}"\n')
    code, _, err = cli("checkpoint", "--db", str(made["db"]))
    assert code != 0 and "is a public (verifier) key" in err and "chmod" not in err


def test_a_key_in_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    missing = tmp_path / "etc" / "witness"
    code, _, err = cli("witness", "key", "create", str(missing / "w.key"), "--name", "w/1")
    assert code != 0 and f"the folder {missing} does not exist" in err
    assert f"install -d -m 700 {missing}" in err


def test_witness_serve_names_only_its_own_tls_option(tmp_path: Path) -> None:
    cli("witness", "key", "create", str(tmp_path / "w.key"), "--name", "w.example/1")
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    code, _, err = cli(
        "witness",
        "serve",
        "--key",
        str(tmp_path / "w.key"),
        "--state",
        str(tmp_path / "s.db"),
        "--log",
        Signer("log.example/1", Ed25519PrivateKey.generate()).verifier.text(),
        "--tls-cert",
        str(cert),
    )
    assert code != 0 and "give --tls-key" in err and "[receiver]" not in err, err
