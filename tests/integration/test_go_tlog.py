"""Opt-in (``FLOWLEDGER_TEST_GO=1``): a tiles directory read by Go's own transparency-log
code, ``golang.org/x/mod/sumdb/note`` and ``sumdb/tlog`` (Debian's ``golang-go`` and
``golang-golang-x-mod-dev``), none of flowledger's: the checkpoint's signature by the vkey
``key create`` prints, the root from the tiles (every tile checked against the signed root),
records proven included and an older tree proven a prefix (``tests/fixtures/tlog_go/main.go``),
on SQLite and PostgreSQL; a tile altered is refused; the same read from the receiver's
``/v1/tlog/`` with a read token."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import Signer
from flowledger.receiver.app import create_app
from flowledger.reports.tiles import write_tiles
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import Store
from flowledger.storage.reads.tree_proofs import ledger_origin
from tests.support.builders import FakeClock, req
from tests.support.receiver import SECRET, make_token, receiver_config, server_thread

GOPATH = Path("/usr/share/gocode")  # where Debian's golang-golang-x-mod-dev puts the module
SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "tlog_go" / "main.go"

pytestmark = pytest.mark.skipif(
    os.environ.get("FLOWLEDGER_TEST_GO") != "1"
    or shutil.which("go") is None
    or not (GOPATH / "src/golang.org/x/mod/sumdb/tlog").is_dir(),
    reason="opt in with FLOWLEDGER_TEST_GO=1 (needs golang-go and golang-golang-x-mod-dev)",
)


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("go") / "tlog-check"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(out.parent / "cache"),
    }
    subprocess.run(["go", "build", "-o", str(out), str(SOURCE)], env=env, check=True, timeout=300)
    return out


def test_gos_tlog_reads_the_tiles_and_agrees(store: Store, checker: Path, tmp_path: Path) -> None:
    ledger = Ledger(store, clock=FakeClock())
    ledger.run_many([("t", ledger.dispatch(f"op-{i}", req(f"e{i}")).work) for i in range(700)])
    signer = create_key(tmp_path / "key", ledger_origin(store))
    folder = tmp_path / "tiles"
    write_tiles(store, signer, folder)
    ledger.run_many([("t", ledger.dispatch(f"more-{i}", req(f"m{i}")).work) for i in range(70)])
    write_tiles(store, signer, folder)  # extended: partial tiles widened, new ones added
    result = subprocess.run(
        [str(checker), str(folder), signer.verifier.text(), "700"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"go ok: {signer.name} at 770, root from tiles")
    # A tile altered: Go's reader checks it against the signed root and refuses.
    tile = folder / "tile/0/001"
    tile.write_bytes(bytes(32) + tile.read_bytes()[32:])
    result = subprocess.run(
        [str(checker), str(folder), signer.verifier.text(), "700"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1 and result.stdout.startswith("FAILED"), result.stdout


def test_gos_tlog_reads_the_receivers_tiles_and_agrees(store: Store, checker: Path) -> None:
    ledger = Ledger(store, clock=FakeClock())
    token = make_token(ledger, "auditor", "read")
    ledger.run_many([("t", ledger.dispatch(f"op-{i}", req(f"e{i}")).work) for i in range(600)])
    signer = Signer(ledger_origin(store), Ed25519PrivateKey.generate())
    with server_thread(
        create_app(ledger, config=receiver_config(), secret=SECRET, signer=signer)
    ) as url:
        result = subprocess.run(
            [str(checker), f"{url}/v1/tlog/", signer.verifier.text(), "300"],
            env={**os.environ, "FLOWLEDGER_TOKEN": token},
            capture_output=True,
            text=True,
            timeout=60,
        )
        refused = subprocess.run(
            [str(checker), f"{url}/v1/tlog/", signer.verifier.text(), "300"],
            env={**os.environ, "FLOWLEDGER_TOKEN": "wrong"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"go ok: {signer.name} at 601, root from tiles")
    assert refused.returncode == 1 and "401" in refused.stdout, refused.stdout
