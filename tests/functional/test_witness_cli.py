"""The witness as another team runs it: `flowledger witness key create` and `flowledger
witness serve` in a process of its own on a real socket, the ledger's `flowledger checkpoint`
sending to it from `[[witnesses]]` and printing the cosigned checkpoint, `flowledger proof`
against that checkpoint, and the standalone verifier requiring a quorum of cosignatures."""

from __future__ import annotations

import runpy
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain.checkpoints import COSIGNATURE_V1, parse_verifier_key
from flowledger.programs.verify_proof import main as verify_main
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import open_store
from tests.support.builders import FakeClock, req
from tests.support.cli import cli
from tests.support.ledgers import new_ledger
from tests.support.receiver import free_port, stop, wait_until_serving


@pytest.fixture
def db(tmp_path: Path) -> str:
    store = new_ledger(tmp_path / "ledger.db")
    ledger = Ledger(store, clock=FakeClock())
    for n in (1, 2, 3):
        ledger.dispatch(f"invoice:{n}", req(f"exec-{n}")).run("token:n8n")
    store.dispose()
    return str(tmp_path / "ledger.db")


@pytest.fixture
def witness_url(tmp_path: Path, db: str) -> Iterator[str]:
    code, out, err = cli(
        "witness", "key", "create", str(tmp_path / "w.key"), "--name", "witness.example/w1"
    )
    assert code == 0, err
    assert (tmp_path / "w.key.pub").read_text().strip() in out
    code, _, err = cli("key", "create", str(tmp_path / "log.key"), "--db", db)
    assert code == 0, err
    port = free_port()
    command = [sys.executable, "-m", "flowledger.cli", "witness", "serve"]
    command += ["--key", str(tmp_path / "w.key"), "--log", str(tmp_path / "log.key.pub")]
    command += ["--state", str(tmp_path / "witness-state.db"), "--port", str(port)]
    log = (tmp_path / "witness.log").open("wb")
    proc = subprocess.Popen(command, stdout=log, stderr=log)
    try:
        wait_until_serving(f"http://127.0.0.1:{port}", proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


def witness_at(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``flowledger.toml`` with the log's key and the witness (its key made by the fixture)
    at ``url``."""
    vkey = (tmp_path / "w.key.pub").read_text().strip()
    config = tmp_path / "flowledger.toml"
    config.write_text(
        f'[checkpoints]\nkey = "{tmp_path / "log.key"}"\n\n'
        f'[[witnesses]]\nurl = "{url}"\nvkey = "{vkey}"\n'
    )
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))


def test_a_checkpoint_cosigned_by_a_witness_process_proves_with_a_quorum(
    db: str,
    tmp_path: Path,
    witness_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vkey = (tmp_path / "w.key.pub").read_text().strip()
    witness_at(tmp_path, witness_url, monkeypatch)
    code, note, err = cli("checkpoint", "--db", db)
    assert code == 0, err
    assert "witness witness.example/w1: cosigned at 20" in err
    assert err.count("w1") == 1, err  # one line per witness, none from the job's logger
    assert note.count("\u2014 ") == 2 and "\u2014 witness.example/w1 " in note
    (tmp_path / "cp.txt").write_text(note)
    proof = tmp_path / "proof.json"
    code, _, err = cli(
        "proof",
        "invoice:2",
        "--checkpoint",
        str(tmp_path / "cp.txt"),
        "--db",
        db,
        "--out",
        str(proof),
    )
    assert code == 0, err
    log_key, w_key = str(tmp_path / "log.key.pub"), str(tmp_path / "w.key.pub")
    capsys.readouterr()
    assert verify_main([str(proof), "--key", log_key, "--witness", w_key, "--quorum", "1"]) == 0
    assert "cosigned by witness.example/w1" in capsys.readouterr().out
    # A second witness that did not cosign: a quorum of two is not met.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from flowledger.domain.cosignatures import Cosigner

    other = Cosigner("witness.example/w2", Ed25519PrivateKey.generate()).verifier.text()
    args = [str(proof), "--key", log_key, "--witness", w_key, "--witness", other]
    assert verify_main(args) == 1
    said = capsys.readouterr().out
    assert "cosigned by 1 of the witnesses given, 2 required: missing witness.example/w2" in said
    assert verify_main([*args, "--quorum", "1"]) == 0
    assert verify_main([*args, "--quorum", "3"]) == 2
    # The ledger's own key given as a witness's is refused as the wrong type.
    assert verify_main([str(proof), "--key", log_key, "--witness", log_key]) == 2
    assert "not a witness's key (type 0x04)" in capsys.readouterr().err
    assert parse_verifier_key(vkey, COSIGNATURE_V1).name == "witness.example/w1"
    # `proof` with no --checkpoint sends a new one to the witness and proves against it.
    code, out, err = cli("proof", "invoice:3", "--db", db)
    assert code == 0 and "witness witness.example/w1: cosigned" in err
    assert "\\u2014 witness.example/w1 " in out  # the note, inside the JSON
    # `bundle` does the same, and its verifier counts the witness's cosignature.
    code, out, err = cli("bundle", "invoice:2", "--out", str(tmp_path / "bundle"), "--db", db)
    assert code == 0 and "witness witness.example/w1: cosigned" in err, err
    assert (tmp_path / "bundle" / "witnesses.vkeys").read_text() == vkey + "\n"
    verifier = runpy.run_path(str(tmp_path / "bundle" / "verify_bundle.py"))
    capsys.readouterr()
    assert verifier["main"]([str(tmp_path / "bundle")]) == 0
    assert "cosigned by 1 of 1 witnesses: witness.example/w1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--log", "not-a-key"],
            "not-a-key: not a verifier key (name+keyid+base64) nor a key file it can read: "
            "no such file or directory",
        ),
        (["--log", "PeterNeumann+c74f20a3"], "NAME+KEYID+BASE64"),
        (["--log", "x", "--key", "{tmp}/no.key"], "--key {tmp}/no.key: no such file"),
    ],
)
def test_witness_serve_refuses_a_bad_log_key_in_one_line(
    tmp_path: Path, args: list[str], says: str
) -> None:
    cli("witness", "key", "create", str(tmp_path / "w.key"), "--name", "w.example/1")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    code, _, err = cli(
        "witness",
        "serve",
        "--key",
        str(tmp_path / "w.key"),
        "--state",
        str(tmp_path / "s.db"),
        *args,
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert says.replace("{tmp}", str(tmp_path)) in err


def test_a_witness_key_name_with_a_space_is_refused(tmp_path: Path) -> None:
    code, _, err = cli("witness", "key", "create", str(tmp_path / "w.key"), "--name", "a b")
    assert code == 2 and "has no spaces" in err
    assert not (tmp_path / "w.key").exists()


def test_with_its_witness_down_bundle_and_proof_fall_back_or_exit_1(
    db: str,
    tmp_path: Path,
    witness_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    witness_at(tmp_path, down, monkeypatch)
    # No checkpoint cosigned yet: the bundle is written, said to lack the cosignature, exit 1.
    bundle = tmp_path / "b1"
    code, out, err = cli("bundle", "invoice:2", "--out", str(bundle), "--db", db)
    assert code == 1, err
    assert f"witness witness.example/w1: not reached: {down}: connection refused" in err
    assert "lacks the witnesses' cosignatures (witness.example/w1)" in err
    assert "check it with" not in out + err and (bundle / "checkpoint").exists()
    code, out, err = cli("proof", "invoice:2", "--db", db)
    assert code == 1 and '"format"' in out and "lacks the witnesses' cosignatures" in err
    # Once the witness has cosigned a checkpoint of 3 operations' events, it is the fallback.
    witness_at(tmp_path, witness_url, monkeypatch)
    assert cli("checkpoint", "--db", db)[0] == 0
    witness_at(tmp_path, down, monkeypatch)
    store = open_store(db)  # the log grows past what the witness cosigned
    Ledger(store, clock=FakeClock()).dispatch("invoice:9", req("exec-9")).run("token:n8n")
    store.dispose()
    code, out, err = cli("bundle", "invoice:2", "--out", str(tmp_path / "b2"), "--db", db)
    assert code == 0, err
    assert "using the latest checkpoint the witnesses cosigned" in err
    verifier = runpy.run_path(str(tmp_path / "b2" / "verify_bundle.py"))
    capsys.readouterr()
    assert verifier["main"]([str(tmp_path / "b2")]) == 0
    code, out, err = cli("proof", "--events", "1-2", "--db", db)
    assert code == 0 and "using the latest checkpoint" in err and "w1 " in out
    # Events past the cosigned checkpoint: no fallback covers them.
    code, _, err = cli("proof", "invoice:9", "--db", db)
    assert code == 1 and "lacks the witnesses' cosignatures" in err
    # The verifier names the witness missing.
    capsys.readouterr()
    assert runpy.run_path(str(bundle / "verify_bundle.py"))["main"]([str(bundle)]) == 1
    assert "0 of the witnesses given, 1 required: missing witness.example/w1" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("kind", ["file", "full"])
def test_bundle_refuses_its_out_or_an_operation_before_the_witnesses(
    db: str, tmp_path: Path, witness_url: str, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    witness_at(tmp_path, witness_url, monkeypatch)
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("x")
    else:
        out.mkdir()
        (out / "x").write_text("x")
    code, _, err = cli("bundle", "invoice:2", "--out", str(out), "--db", db)
    assert code != 0 and f"--out {out}: not" in err and "w1:" not in err
    code, _, err = cli("bundle", "invoice:404", "--out", str(tmp_path / "new"), "--db", db)
    assert code != 0 and "no events of operation 'invoice:404'" in err
    code, _, err = cli("bundle", "--events", "2-99", "--out", str(tmp_path / "new"), "--db", db)
    assert code != 0 and "not all in the log's 3 events" in err
    assert "witness.example/w1" not in err and not (tmp_path / "new").exists()


def test_after_a_genuine_restore_the_witness_forgets_and_takes_the_next_as_a_first(
    db: str, tmp_path: Path, witness_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    witness_at(tmp_path, witness_url, monkeypatch)
    origin = (tmp_path / "log.key.pub").read_text().split("+")[0]
    backup = tmp_path / "backup.db"
    with sqlite3.connect(db) as src, sqlite3.connect(backup) as dst:
        src.backup(dst)
    store = open_store(db)
    Ledger(store, clock=FakeClock()).dispatch("invoice:4", req("exec-4")).run("token:n8n")
    store.dispose()
    assert cli("checkpoint", "--db", db)[0] == 0  # the witness holds the longer history
    code, _, err = cli("checkpoint", "--db", str(backup))  # the ledger put back from a backup
    assert code == 1 and "refused: it has cosigned" in err
    state = str(tmp_path / "witness-state.db")
    forget = ["witness", "forget", "--state", state, origin]
    # Asked, and answered no: nothing forgotten, still refused.
    result = CliRunner().invoke(app, forget, input="n\n")
    assert result.exit_code == 1 and "nothing forgotten" in result.stderr
    assert f"holds {origin} at " in result.stdout
    assert cli("checkpoint", "--db", str(backup))[0] == 1
    code, out, err = cli(*forget, "--yes")
    assert code == 0 and "its next checkpoint is taken as a first one" in out, err
    with sqlite3.connect(state) as conn:  # kept as evidence
        assert conn.execute("SELECT origin FROM forgotten").fetchall() == [(origin,)]
    code, _, err = cli("checkpoint", "--db", str(backup))
    assert code == 0 and "witness witness.example/w1: cosigned at" in err, err
    code, _, err = cli("witness", "forget", "--state", state, "flowledger/other", "--yes")
    assert code != 0 and "holds no checkpoint of 'flowledger/other'" in err
    code, _, err = cli("witness", "forget", "--state", str(tmp_path / "none.db"), origin)
    assert code != 0 and "no witness state there" in err


def test_a_witness_key_is_made_whatever_flowledger_toml_lies_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A witness reads no ledger settings: a broken ``flowledger.toml`` where its operator
    happens to stand stops the ledger's commands, not the witness's."""
    (tmp_path / "flowledger.toml").write_text("garbage =\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_CONFIG", raising=False)
    code, out, err = cli("witness", "key", "create", "w.key", "--name", "witness.example/w1")
    assert (code, err) == (0, "")
    assert (tmp_path / "w.key.pub").read_text().strip() in out
    code, _, err = cli("key", "create", "log.key", "--db", str(tmp_path / "ledger.db"))
    assert code == 2 and "flowledger.toml: not valid TOML" in err


def test_a_witness_served_beyond_loopback_without_tls_says_what_crosses_in_clear(
    tmp_path: Path, db: str
) -> None:
    """A witness takes no API tokens: its warning names what it does send in clear."""
    witness_key = ("witness", "key", "create", str(tmp_path / "w.key"), "--name", "w.example/w1")
    assert cli(*witness_key)[0] == 0
    assert cli("key", "create", str(tmp_path / "log.key"), "--db", db)[0] == 0
    port = free_port()
    command = [sys.executable, "-m", "flowledger.cli", "witness", "serve", "--host", "0.0.0.0"]
    command += ["--key", str(tmp_path / "w.key"), "--log", str(tmp_path / "log.key.pub")]
    command += ["--state", str(tmp_path / "state.db"), "--port", str(port)]
    with (tmp_path / "witness.log").open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=log)
        try:
            wait_until_serving(f"http://127.0.0.1:{port}", proc)
        finally:
            stop(proc)
    said = (tmp_path / "witness.log").read_text()
    assert f"serving on 0.0.0.0:{port} without TLS: checkpoints and cosignatures cross" in said
    assert "API tokens" not in said
