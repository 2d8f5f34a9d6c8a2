"""Opt-in: the ledger's vkey, a checkpoint cosigned by a witness, an inclusion and a
consistency proof, read by Go's own golang.org/x/mod/sumdb/note and sumdb/tlog.

Runs when ``go`` is on the PATH and ``FLOWLEDGER_INTEROP_GO_MOD`` names a source tree of
golang.org/x/mod (its ``sumdb/note`` and ``sumdb/tlog`` are copied into a module of the test's
own, since both need nothing but the standard library): e.g. ``git clone
https://go.googlesource.com/mod``."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.config import WitnessConfig
from flowledger.domain import merkle
from flowledger.domain.cosignatures import Cosigner
from flowledger.programs.witness import create_witness_app
from flowledger.scheduled.witnesses import Witnesses
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage import merkle as tree
from flowledger.storage.migrate import init_ledger
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.reads.chain import snapshot
from flowledger.storage.witness_state import WitnessState
from tests.support.builders import FakeClock, req
from tests.support.receiver import uvicorn_thread

X_MOD = os.environ.get("FLOWLEDGER_INTEROP_GO_MOD")
pytestmark = pytest.mark.skipif(
    not X_MOD or shutil.which("go") is None,
    reason="set FLOWLEDGER_INTEROP_GO_MOD to a golang.org/x/mod source tree, with go on PATH",
)
HERE = Path(__file__).parent


def go_program(folder: Path) -> Path:
    assert X_MOD is not None
    for package in ("note", "tlog"):
        target = folder / "sumdb" / package
        target.mkdir(parents=True)
        for source in (Path(X_MOD) / "sumdb" / package).glob("*.go"):
            if not source.name.endswith("_test.go"):
                shutil.copy(source, target / source.name)
    (folder / "go.mod").write_text("module interop\n\ngo 1.19\n")
    shutil.copy(HERE / "checkpoint_check.go", folder / "main.go")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOCACHE": str(folder / ".c")}
    subprocess.run(["go", "build", "-o", "check", "."], cwd=folder, env=env, check=True)
    return folder / "check"


def test_go_reads_the_vkey_the_cosigned_checkpoint_and_the_proofs(tmp_path: Path) -> None:
    program = go_program(tmp_path / "go")
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    ledger = Ledger(store, clock=FakeClock())
    for n in range(11):
        ledger.dispatch(f"invoice:{n}", req(f"exec-{n}")).run("token:n8n")
    signer = create_key(tmp_path / "log.key", proofs.ledger_origin(store))
    cosigner = Cosigner("witness.example/w1", Ed25519PrivateKey.generate())
    app = create_witness_app(WitnessState(tmp_path / "w.db"), cosigner, [signer.verifier])
    with uvicorn_thread(app) as running:  # type: ignore[arg-type]
        config = WitnessConfig(url=running.url, vkey=cosigner.verifier.text())
        sender = Witnesses(store, signer, [config])
        try:
            done = sender.checkpoint()
        finally:
            sender.close()
    assert done.cosigned == 1
    (tmp_path / "note").write_text(done.note)
    size, old, index = done.size, 5, 7
    with snapshot(store) as conn:
        # The leaf as the stored tree has it, whatever the leaf's input is.
        leaf = tree.nodes(conn, [(0, index)])[(0, index)]
        inclusion = tree.proof(conn, merkle.inclusion_ranges(index, size))
        consistency = tree.proof(conn, merkle.consistency_ranges(old, size))
        old_root = tree.root(conn, old)
    store.dispose()

    def b64(hashes: list[bytes]) -> str:
        return ",".join(base64.b64encode(h).decode() for h in hashes)

    args = [signer.verifier.text(), cosigner.verifier.text(), str(tmp_path / "note")]
    args += [str(index), b64([leaf]), b64(inclusion), str(old), b64([old_root]), b64(consistency)]
    result = subprocess.run([str(program), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"go ok: {signer.name} at {size}, cosigned by witness.")
    # And a changed proof fails there too.
    bad = [*args[:5], b64(inclusion[::-1]), *args[6:]]
    result = subprocess.run([str(program), *bad], capture_output=True, text=True)
    assert result.returncode == 1 and result.stdout.startswith("go FAILED")
