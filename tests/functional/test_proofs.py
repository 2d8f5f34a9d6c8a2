"""Checkpoints and proofs, checked by the standalone verifier with no database: a good proof
verifies; a tampered event, a removed event, a truncated log, a forked log and a checkpoint
signed with another key each fail it, with a line naming what broke."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain.checkpoints import Signer, unverified_checkpoint
from flowledger.domain.proofs import consistency_document
from flowledger.programs.verify_proof import main as verify_main
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key, public_path
from flowledger.storage.engine import LedgerError, Store, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import tree_proofs as proofs
from tests.support.builders import FakeClock, req
from tests.support.database import engine_for, rebuild_tree, rewrite_chain, truncate_chain
from tests.support.ledgers import new_ledger

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def work(store: Store, *names: str) -> None:
    ledger = Ledger(store, clock=FakeClock())
    for name in names:
        ledger.dispatch(name, req(f"exec-{name}")).run("token:n8n")
        ledger.confirm(name, f"R-{name}", execution_id=f"exec-{name}").run("token:n8n")


@pytest.fixture
def db(tmp_path: Path) -> str:
    store = new_ledger(tmp_path / "ledger.db")
    work(store, "invoice:1", "invoice:2", "invoice:3")
    store.dispose()
    return str(tmp_path / "ledger.db")


@pytest.fixture
def signer(db: str, tmp_path: Path) -> Signer:
    store = open_store(db)
    try:
        return create_key(tmp_path / "checkpoint.key", proofs.ledger_origin(store))
    finally:
        store.dispose()


def checkpoint(db: str, signer: Signer) -> str:
    store = open_store(db)
    try:
        return proofs.signed_checkpoint(store, signer)
    finally:
        store.dispose()


def verify(doc: dict[str, Any], signer: Signer, tmp_path: Path) -> tuple[int, str]:
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(doc))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowledger.programs.verify_proof",
            str(path),
            "--key",
            signer.verifier.text(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout + result.stderr


def check(
    doc: dict[str, Any], signer: Signer, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """The verifier's own entry point, in this process (faster than a subprocess)."""
    path = Path(doc.pop("_path"))
    path.write_text(json.dumps(doc))
    code = verify_main([str(path), "--key", signer.verifier.text()])
    return code, capsys.readouterr().out


def operation_proof(db: str, operation_id: str, note: str) -> dict[str, Any]:
    store = open_store(db)
    try:
        return proofs.operation_proof(store, operation_id, note)
    finally:
        store.dispose()


def test_a_proof_verifies_with_no_database_and_nothing_but_cryptography(
    db: str, signer: Signer, tmp_path: Path
) -> None:
    doc = operation_proof(db, "invoice:2", checkpoint(db, signer))
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(doc))
    # The verifier as an auditor runs it, reporting every module it loaded.
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from flowledger.programs.verify_proof import main\n"
        f"code = main([{str(path)!r}, '--key', {signer.verifier.text()!r}])\n"
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before}))\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    said, loaded = result.stdout.splitlines()
    assert said.startswith("proof ok: 2 events of operation 'invoice:2', in flowledger/")
    outside = set(eval(loaded)) - set(sys.stdlib_module_names) - {"__main__"}
    assert outside <= {"flowledger", "cryptography", "_cffi_backend", "_openssl", "cffi"}, outside


def test_a_tampered_event_fails_naming_it(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = operation_proof(db, "invoice:1", checkpoint(db, signer))
    doc["events"][1]["data"]["receipt"] = "R-forged"
    seq = doc["events"][1]["seq"]
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1
    assert out == (
        f"proof FAILED: event {seq}: its content does not match its hash: the event was altered\n"
    )


def test_a_rewrite_with_its_hashes_and_tree_redone_fails_against_the_earlier_checkpoint(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = checkpoint(db, signer)
    rewrite_chain(db, 2, {"receipt": "R-forged", "execution_id": None, "attempt": 1})
    code, _, err = cli("proof", "invoice:1", "--db", db, "--checkpoint", _file(tmp_path, old))
    assert code == 2 and "the log was rewritten or forked since it was signed" in err
    # A ledger that serves the proof anyway: the file names the old checkpoint.
    doc = {**operation_proof(db, "invoice:1", checkpoint(db, signer)), "checkpoint": old}
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and "is not in the log the checkpoint signs" in out


def remove_event(db: str, seq: int) -> None:
    """The careful forger again: event ``seq`` deleted, the later ones renumbered and chained
    anew, the head and the tree made to agree."""
    engine = engine_for(db)
    with engine.begin() as conn:
        rebuild_tree(conn)  # drops the guards
        data = conn.execute(sa.text("SELECT data FROM events WHERE seq = :s"), {"s": seq + 1})
        following = json.loads(data.scalar_one())
        conn.execute(sa.text("DELETE FROM events WHERE seq = :s"), {"s": seq})
        conn.execute(sa.text("UPDATE events SET seq = -(seq - 1) WHERE seq > :s"), {"s": seq})
        conn.execute(sa.text("UPDATE events SET seq = -seq WHERE seq < 0"))
        conn.execute(sa.text("UPDATE chain_head SET seq = seq - 1"))
        conn.execute(
            sa.text(
                "UPDATE events SET prev_hash = (SELECT hash FROM events WHERE seq = :p)"
                " WHERE seq = :s"
            ),
            {"p": seq - 1, "s": seq},
        )
    engine.dispose()
    rewrite_chain(db, seq, following)


def test_a_removed_event_fails_the_consistency_with_the_earlier_checkpoint(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = checkpoint(db, signer)
    remove_event(db, 3)
    store = open_store(db)
    work(store, "invoice:4")
    store.dispose()
    assert cli("verify", "--db", db)[0] == 0  # the forged chain links up
    new = checkpoint(db, signer)
    code, _, err = cli(
        "proof", "--consistency", _file(tmp_path, old), _file(tmp_path, new), "--db", db
    )
    assert code == 2 and "rewritten or forked" in err
    o, n = unverified_checkpoint(old), unverified_checkpoint(new)
    assert n.size > o.size
    doc = consistency_document(old, new, _consistency(db, o.size, n.size))
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and out.startswith("proof FAILED: the new checkpoint does not extend the old")
    assert "rewritten or removed" in out


def test_a_truncated_log_fails_naming_the_truncation(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = checkpoint(db, signer)
    truncate_chain(db, 3)
    new = checkpoint(db, signer)
    code, _, err = cli(
        "proof", "--consistency", _file(tmp_path, old), _file(tmp_path, new), "--db", db
    )
    assert code == 2 and "events were removed since" in err
    doc = consistency_document(old, new, [])
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    size = unverified_checkpoint(old).size
    assert code == 1 and out == (
        f"proof FAILED: the new checkpoint (3 events) is smaller than the old ({size}): "
        "the log was truncated\n"
    )


def test_a_forked_log_fails_naming_the_fork(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fork = str(tmp_path / "fork.db")
    with sqlite3.connect(db) as src, sqlite3.connect(fork) as dst:
        src.backup(dst)
    for path, name in ((db, "invoice:a"), (fork, "invoice:b")):
        store = open_store(path)
        work(store, name)
        store.dispose()
    mine, theirs = checkpoint(db, signer), checkpoint(fork, signer)
    size = unverified_checkpoint(mine).size
    doc = consistency_document(mine, theirs, [])
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and out.startswith("proof FAILED: the new checkpoint does not extend the old")
    assert f"two different roots for one tree size ({size})" in out
    store = open_store(fork)
    work(store, "invoice:c")
    store.dispose()
    later = checkpoint(fork, signer)
    code, _, err = cli(
        "proof", "--consistency", _file(tmp_path, mine), _file(tmp_path, later), "--db", fork
    )
    assert code == 2 and "rewritten or forked" in err
    doc = consistency_document(
        mine, later, _consistency(fork, size, unverified_checkpoint(later).size)
    )
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and "the log was forked" in out


def test_a_checkpoint_signed_with_another_key_is_refused(
    db: str, signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = create_key(tmp_path / "other.key", signer.name)
    doc = operation_proof(db, "invoice:3", checkpoint(db, other))
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and out.startswith(
        f"proof FAILED: checkpoint: the checkpoint is not signed by the key given ({signer.name}"
    )
    note = checkpoint(db, signer)
    size = unverified_checkpoint(note).size
    doc["checkpoint"] = note.replace(f"\n{size}\n", f"\n{size - 1}\n", 1)  # its signature kept
    code, out = check({**doc, "_path": tmp_path / "p.json"}, signer, capsys)
    assert code == 1 and "does not verify: the checkpoint was altered" in out


def test_the_cli_makes_a_key_signs_and_proves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_CONFIG", raising=False)
    db = str(tmp_path / "ledger.db")
    store, _ = init_ledger(db)
    work(store, "invoice:9")
    store.dispose()
    key = tmp_path / "keys" / "checkpoint.key"
    key.parent.mkdir()
    code, out, err = cli("key", "create", str(key), "--db", db)
    assert code == 0, err
    assert key.stat().st_mode & 0o777 == 0o600 and public_path(key).read_text() in out + "\n"
    code, _, err = cli("key", "create", str(key), "--db", db)
    assert code == 2 and "never overwritten" in err
    code, _, err = cli("checkpoint", "--db", db)
    assert code == 2 and "no signing key" in err
    (tmp_path / "flowledger.toml").write_text(f'[checkpoints]\nkey = "{key}"\n')
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(tmp_path / "flowledger.toml"))
    code, note, err = cli("checkpoint", "--db", db)
    assert code == 0, err
    assert note.splitlines()[1] == "2" and "\n\n\u2014 flowledger/" in note
    proof_file = tmp_path / "proof.json"
    code, _, err = cli("proof", "invoice:9", "--db", db, "--out", str(proof_file))
    assert code == 0, err
    assert verify_main([str(proof_file), "--key", str(public_path(key))]) == 0
    code, _, err = cli("proof", "--db", db)
    assert code == 2 and "give one of OPERATION_ID, --events" in err
    key.chmod(0o644)
    code, _, err = cli("checkpoint", "--db", db)
    assert code == 2 and "readable by others (0644): chmod 600 it" in err


def _file(tmp_path: Path, note: str) -> str:
    path = tmp_path / f"cp-{abs(hash(note))}.txt"
    path.write_text(note)
    return str(path)


def _consistency(db: str, old: int, new: int) -> list[bytes]:
    from flowledger.domain import merkle
    from flowledger.storage import merkle as tree
    from flowledger.storage.reads.chain import snapshot

    store = open_store(db)
    try:
        with snapshot(store) as conn:
            return tree.proof(conn, merkle.consistency_ranges(old, new))
    finally:
        store.dispose()


def test_a_checkpoint_of_another_ledger_is_refused(db: str, signer: Signer, tmp_path: Path) -> None:
    other = str(tmp_path / "other.db")
    store, _ = init_ledger(other)
    work(store, "invoice:1")
    store.dispose()
    with pytest.raises(LedgerError, match="not of this ledger"):
        operation_proof(other, "invoice:1", checkpoint(db, signer))


def test_a_proof_of_one_event_says_so_in_the_singular(
    db: str, signer: Signer, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(db)
    try:
        Ledger(store, clock=FakeClock()).dispatch("invoice:4", req("exec-4")).run("token:n8n")
    finally:
        store.dispose()
    doc = operation_proof(db, "invoice:4", checkpoint(db, signer))
    doc["_path"] = str(Path(db).parent / "proof.json")
    code, said = check(doc, signer, capsys)
    assert code == 0, said
    assert said.startswith("proof ok: 1 event of operation 'invoice:4', in flowledger/"), said


@pytest.mark.parametrize("size", ["\u00b2", "\u0663"])
def test_a_checkpoint_whose_size_is_not_ascii_digits_is_refused_in_one_line(
    db: str, signer: Signer, tmp_path: Path, size: str
) -> None:
    """An unsigned checkpoint handed to `proof --checkpoint`: `²` was a traceback (isdigit
    took it, int() did not), `٣` was read as 3."""
    root = unverified_checkpoint(checkpoint(db, signer)).root
    line = base64.b64encode(bytes(68)).decode()
    note = f"{signer.name}\n{size}\n{base64.b64encode(root).decode()}\n\n\u2014 x {line}\n"
    code, _, err = cli("proof", "invoice:1", "--checkpoint", _file(tmp_path, note), "--db", db)
    assert code == 2 and "is not a whole number" in err and "Traceback" not in err


def test_json_nested_too_deep_is_one_line_not_a_traceback(
    signer: Signer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    code = verify_main([str(path), "--key", signer.verifier.text()])
    assert code == 2 and "nested too deep" in capsys.readouterr().err
