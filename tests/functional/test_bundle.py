"""``flowledger bundle``: an auditor's folder that its own single-file verifier checks on a
Python where flowledger cannot be imported (the standard library and ``cryptography`` alone),
on SQLite and PostgreSQL; an event altered, left out, moved or proven against another
checkpoint, a checkpoint of another key or origin, each fails it with a line naming why."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain.checkpoints import Signer
from flowledger.receiver.api.tokens import create_token
from flowledger.reports.bundle import write_bundle
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import LedgerError, Store
from tests.support.builders import FakeClock, req
from tests.support.distributions import dependency_closure

runner = CliRunner()
WF = "token:n8n"


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def charged(store: Store) -> Ledger:
    """A token, a charge confirmed, a charge whose second receipt opened a conflict, others."""
    create_token(Ledger(store), "n8n", "write", signing=False, server_secret=None)
    ledger = Ledger(store, clock=FakeClock())
    for name in ("charge:INV-41", "charge:INV-42", "charge:INV-43"):
        ledger.dispatch(name, req(f"exec-{name}")).run(WF)
        ledger.confirm(name, f"R-{name}", execution_id=f"exec-{name}").run(WF)
    ledger.confirm("charge:INV-42", "R-other", execution_id="exec-2").run(WF)
    return ledger


@pytest.fixture(scope="module")
def bare_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``cryptography`` and what it needs, and nothing else: the site of a
    Python an auditor installed ``cryptography`` into."""
    site = tmp_path_factory.mktemp("site")
    for dist in dependency_closure("cryptography"):
        found = importlib.metadata.distribution(dist)
        root = Path(str(found.locate_file("")))
        for top in {f.parts[0] for f in found.files or []} - {"..", "bin"}:
            if not top.endswith(".dist-info") and not (site / top).exists():
                (site / top).symlink_to(root / top)
    return site


def run_alone(bare_site: Path, folder: Path, *args: str) -> tuple[int, str]:
    """The bundle's verifier on ``python -I -S`` with only ``bare_site`` added: flowledger,
    the project and the ledger's environment cannot be imported."""
    script = (
        "import importlib.util, runpy, sys\n"
        f"sys.path.append({str(bare_site)!r})\n"
        "assert importlib.util.find_spec('flowledger') is None, 'flowledger is importable'\n"
        "assert importlib.util.find_spec('sqlalchemy') is None\n"
        f"sys.argv = ['verify_bundle.py', *{list(args)!r}]\n"
        f"runpy.run_path({str(folder / 'verify_bundle.py')!r}, run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout + result.stderr


def test_a_bundle_checks_out_on_a_python_without_flowledger(
    charged: Ledger, db_url: str, configured_signer: Signer, tmp_path: Path, bare_site: Path
) -> None:
    out = tmp_path / "bundle"
    code, said = cli("bundle", "charge:INV-42", "charge:INV-41", "--out", str(out), "--db", db_url)
    assert code == 0, said
    names = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"README.md", "verify_bundle.py", "checkpoint", "log.vkey", "bundle.json"} <= names
    claims = json.loads((out / "bundle.json").read_text())
    assert claims["operations"] == ["charge:INV-42", "charge:INV-41"]
    readme = (out / "README.md").read_text()
    assert readme.startswith("# What this bundle proves") and "charged twice" in readme
    assert '`"charge:INV-42"`' in readme and "What it cannot prove" in readme
    code, said = run_alone(bare_site, out, str(out))
    assert code == 0, said
    assert said.strip().splitlines()[-1].startswith(f"bundle ok: {len(claims['events'])} events")
    assert "receipt_conflict" in (out / f"events/{claims['events'][-1]}.json").read_text()
    # The key given by another route than the folder, as the README asks.
    code, said = run_alone(bare_site, out, str(out), "--key", configured_signer.verifier.text())
    assert code == 0, said


def test_events_of_no_operation_bundle_by_number(
    charged: Ledger, db_url: str, configured_signer: Signer, tmp_path: Path, bare_site: Path
) -> None:
    out = tmp_path / "first"
    code, said = cli("bundle", "--events", "1-3", "--out", str(out), "--db", db_url)
    assert code == 0, said
    code, said = run_alone(bare_site, out, str(out))
    assert code == 0 and "event 1 ok:" in said and "token_created (no operation)" in said, said


def tampered(out: Path, how: str, configured_signer: Signer) -> None:
    claims = json.loads((out / "bundle.json").read_text())
    first = claims["events"][0]
    event = out / f"events/{first}.json"
    if how == "event altered":
        event.write_bytes(event.read_bytes().replace(b"token:n8n", b"token:n9n"))
    elif how == "event removed":
        event.unlink()
    elif how == "proof of another leaf":
        proof = out / f"events/{first}.tlog-proof"
        proof.write_text(proof.read_text().replace(f"index {first - 1}\n", f"index {first}\n"))
    elif how == "another key":
        other = Signer(configured_signer.name, Ed25519PrivateKey.generate())
        (out / "log.vkey").write_text(other.verifier.text())
    elif how == "another origin":
        note = (out / "checkpoint").read_text()
        (out / "checkpoint").write_text(
            note.replace(configured_signer.name, "flowledger/elsewhere", 1)
        )
    elif how == "claims another operation":
        claims["operations"] = ["charge:INV-99"]
        (out / "bundle.json").write_text(json.dumps(claims))
    elif how == "checkpoint size changed":
        lines = (out / "checkpoint").read_text().split("\n")
        lines[1] = "\u0663"
        (out / "checkpoint").write_text("\n".join(lines))
    elif how == "chain broken":
        proof = out / f"events/{claims['events'][1]}.tlog-proof"
        lines = proof.read_text().split("\n")
        lines[1] = "extra " + "A" * 43 + "="
        proof.write_text("\n".join(lines))


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("event altered", "is not in the log the checkpoint signs"),
        ("event removed", "cannot read"),
        ("proof of another leaf", "proves leaf"),
        ("another key", "is not signed by"),
        ("another origin", "the checkpoint is of 'flowledger/elsewhere'"),
        ("claims another operation", "which the bundle is not about"),
        ("checkpoint size changed", "is not a decimal number"),
        ("chain broken", "is not in the log the checkpoint signs"),
    ],
)
def test_a_tampered_bundle_fails_its_verifier_in_one_line(
    charged: Ledger,
    store: Store,
    configured_signer: Signer,
    tmp_path: Path,
    bare_site: Path,
    how: str,
    says: str,
) -> None:
    out = tmp_path / "bundle"
    write_bundle(store, configured_signer, out, ["charge:INV-42"])
    tampered(out, how, configured_signer)
    code, said = run_alone(bare_site, out, str(out))
    assert code in (1, 2) and says in said and len(said.strip().splitlines()) == 1, said


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["charge:none"], "no events of operation 'charge:none'"),
        (["--events", "0"], "numbered from 1"),
        (["--events", "1-99999"], "not all in the log's"),
        (["--events", "\u00b2"], "is not an event number"),
        (["--events", "1", "charge:INV-41"], "one of the two"),
        ([], "one of the two"),
        (["\x1b[31mcharge\u202e:1\n"], "no events of operation"),
        (["x" * 5000], "no events of operation"),
    ],
)
def test_bundle_refuses_what_it_cannot_prove_in_one_line(
    charged: Ledger,
    db_url: str,
    configured_signer: Signer,
    tmp_path: Path,
    args: list[str],
    says: str,
) -> None:
    code, said = cli("bundle", *args, "--out", str(tmp_path / "b"), "--db", db_url)
    assert code != 0 and says in said and len(said.strip().splitlines()) == 1, said


def test_bundle_never_writes_into_a_folder_that_holds_something(
    charged: Ledger, store: Store, db_url: str, configured_signer: Signer, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(LedgerError, match="is not empty"):
        write_bundle(store, configured_signer, out, ["charge:INV-41"])
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    code, said = cli("bundle", "charge:INV-41", "--db", str(store.engine.url))
    assert code != 0 and "--out" in said
    code, said = cli("bundle", "charge:INV-41", "--out", str(out / "notes.txt"), "--db", db_url)
    assert code != 0 and "not a folder" in said and len(said.strip().splitlines()) == 1, said
