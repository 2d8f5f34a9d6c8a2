"""What an auditor holding the log alone can check, on SQLite and PostgreSQL: the export
re-hashes to the chain, any event is provable by its number (a token's creation, event 1), a
truncation that left tree nodes behind and tokens no event accounts for are named by
``verify``, and ``flowledger tiles`` writes (and extends) a C2SP tiles directory whose files
alone give the checkpoint's root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.domain import merkle
from flowledger.domain.checkpoints import Signer, open_checkpoint
from flowledger.domain.hashing import chain_hash
from flowledger.domain.proofs import SEALED
from flowledger.domain.tiles import Tile, bundle_entries, root_from_tiles, tile_hashes
from flowledger.programs.verify_proof import main as verify_main
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from tests.support.builders import FakeClock, req
from tests.support.database import engine_for, truncate_chain

runner = CliRunner()
WF = "token:n8n"


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


def work(ledger: Ledger, *names: str) -> None:
    for name in names:
        ledger.dispatch(name, req(f"exec-{name}")).run(WF)
        ledger.confirm(name, f"R-{name}", execution_id=f"exec-{name}").run(WF)


def verified(doc: dict[str, object], configured_signer: Signer, tmp_path: Path) -> int:
    path = tmp_path / "proof.json"
    path.write_text(json.dumps(doc))
    return verify_main([str(path), "--key", configured_signer.verifier.text()])


def test_every_exported_event_re_hashes_even_at_a_whole_second(store: Store, db_url: str) -> None:
    ledger = Ledger(store, clock=FakeClock())  # a whole second, every event
    work(ledger, "invoice:1", "invoice:2")
    code, out = cli("export", "--db", db_url)
    assert code == 0, out
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines and lines[0]["at"].endswith(".000000+00:00")
    for event in lines:
        assert chain_hash(event["prev_hash"], {f: event[f] for f in SEALED}) == event["hash"]


def test_events_of_no_operation_are_proven_by_their_number(
    store: Store, db_url: str, configured_signer: Signer, tmp_path: Path
) -> None:
    create_token(Ledger(store), "auditor", "read", signing=False, server_secret=None)
    work(Ledger(store, clock=FakeClock()), "invoice:1")
    with store.reader.connect() as conn:
        kinds = conn.execute(sa.text("SELECT seq, kind FROM events ORDER BY seq")).all()
    assert kinds[0].kind == "token_created"
    code, out = cli("proof", "--events", "1", "--db", db_url)
    assert code == 0, out
    doc = json.loads(out)
    assert [e["kind"] for e in doc["events"]] == ["token_created"]
    assert verified(doc, configured_signer, tmp_path) == 0
    code, out = cli("proof", "--events", f"1-{len(kinds)}", "--db", db_url)
    assert code == 0, out
    assert verified(json.loads(out), configured_signer, tmp_path) == 0


def test_a_range_proof_with_an_event_left_out_or_moved_fails(
    store: Store,
    db_url: str,
    configured_signer: Signer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1", "invoice:2")
    code, out = cli("proof", "--events", "1-3", "--db", db_url)
    assert code == 0, out
    doc = json.loads(out)
    short = {**doc, "events": doc["events"][:2]}
    assert verified(short, configured_signer, tmp_path) == 1
    assert "claims events 1-3 but holds 2 events" in capsys.readouterr().out
    moved = {**doc, "range": [2, 4]}
    assert verified(moved, configured_signer, tmp_path) == 1
    assert "event 1 is not event 2 of the range" in capsys.readouterr().out


@pytest.mark.parametrize(
    "given",
    ["0", "-1", "1-", "-", "3-2", "1-100001", "\u0663", "\u00b2", "1.5", "", "9" * 20, "1 2"],
)
def test_proof_events_refuses_what_is_no_event_number(
    store: Store, db_url: str, configured_signer: Signer, given: str
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1")
    code, out = cli("proof", "--events", given, "--db", db_url)
    assert code != 0 and len(out.strip().splitlines()) == 1, out
    assert "Traceback" not in out


def test_proof_of_events_past_the_log_is_refused(
    store: Store, db_url: str, configured_signer: Signer
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1")
    code, out = cli("proof", "--events", "2-9", "--db", db_url)
    assert code != 0 and "not all in the log's 2 events" in out, out
    code, out = cli("proof", "invoice:1", "--events", "1", "--db", db_url)
    assert code != 0 and "give one of" in out


def test_verify_names_a_truncation_that_left_tree_nodes_past_the_end(
    store: Store, db_url: str
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1", "invoice:2", "invoice:3")
    assert cli("verify", "--db", db_url)[0] == 0
    store.dispose()
    truncate_chain(db_url, 4, rebuild=False)  # the last two events gone, the head rolled back
    code, out = cli("verify", "--db", db_url)
    assert code != 0, out
    assert "past the chain's end at 4: events after it were removed" in out


def test_deep_verify_compares_the_tokens_with_their_events(store: Store, db_url: str) -> None:
    create_token(Ledger(store), "ci", "write", signing=False, server_secret=None)
    create_token(Ledger(store), "auditor", "read", signing=False, server_secret=None)
    assert cli("verify", "--deep", "--db", db_url)[0] == 0
    store.dispose()
    engine = engine_for(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE api_tokens SET scope = 'operator' WHERE name = 'auditor'"))
        conn.execute(
            sa.text(
                "INSERT INTO api_tokens (name, scope, token_hash, created_at) "
                "VALUES ('backdoor', 'operator', :h, :at)"
            ),
            {"h": "f" * 64, "at": "2026-01-01 00:00:00"},
        )
        conn.execute(sa.text("DELETE FROM api_tokens WHERE name = 'ci'"))
    engine.dispose()
    code, out = cli("verify", "--deep", "--db", db_url)
    assert code != 0, out
    assert "token auditor: scope is 'operator', the events say 'read'" in out
    assert "token backdoor: no event records this token" in out
    assert "token ci: an event created it, but it is not stored" in out


# -- tiles -------------------------------------------------------------------------------------


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "checkpoint"
    }


def root_of_folder(folder: Path, size: int) -> bytes:
    def hashes_at(level: int, index: int, width: int) -> list[bytes]:
        tile = Tile(level, index, width)
        return tile_hashes((folder / tile.path()).read_bytes(), tile)

    return root_from_tiles(size, hashes_at)


def test_tiles_written_then_extended_give_the_checkpoints_root_from_the_files_alone(
    store: Store, db_url: str, configured_signer: Signer, tmp_path: Path
) -> None:
    ledger = Ledger(store, clock=FakeClock())
    ledger.run_many([(WF, ledger.dispatch(f"op-{i}", req(f"e-{i}")).work) for i in range(300)])
    folder = tmp_path / "tiles"
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code == 0 and "300 events (was 0)" in out, out
    cp = open_checkpoint((folder / "checkpoint").read_text(), configured_signer.verifier)
    assert cp.size == 300 and root_of_folder(folder, 300) == cp.root
    assert {"tile/0/000", "tile/0/001.p/44", "tile/1/000.p/1", "tile/entries/001.p/44"} <= set(
        files_of(folder)
    )
    # Each entry is the leaf's input: the event's chain hash, whose leaf hash is in tile 0.
    with store.reader.connect() as conn:
        hashes = list(conn.execute(sa.text("SELECT hash FROM events ORDER BY seq")).scalars())
    entries = bundle_entries((folder / "tile/entries/000").read_bytes())
    assert entries == [bytes.fromhex(h) for h in hashes[:256]]
    leaves = tile_hashes((folder / "tile/0/000").read_bytes(), Tile(0, 0, 256))
    assert leaves == [merkle.leaf_hash(e) for e in entries]
    full = folder / "tile/0/000"
    stamp = full.stat().st_mtime_ns
    ledger.run_many([(WF, ledger.dispatch(f"more-{i}", req(f"m-{i}")).work) for i in range(230)])
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code == 0 and "530 events (was 300)" in out, out
    assert full.stat().st_mtime_ns == stamp  # a full tile is never written again
    cp = open_checkpoint((folder / "checkpoint").read_text(), configured_signer.verifier)
    assert cp.size == 530 and root_of_folder(folder, 530) == cp.root
    fresh = tmp_path / "fresh"
    assert cli("tiles", str(fresh), "--db", db_url)[0] == 0
    extended = files_of(folder)
    assert all(extended[name] == data for name, data in files_of(fresh).items())
    assert cli("tiles", str(folder), "--db", db_url)[1].endswith("0 tile files written\n")


def test_tiles_refuse_a_folder_of_another_log_or_of_a_rewritten_one(
    store: Store, db_url: str, configured_signer: Signer, tmp_path: Path
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1", "invoice:2")
    folder = tmp_path / "tiles"
    assert cli("tiles", str(folder), "--db", db_url)[0] == 0
    note = (folder / "checkpoint").read_text()
    origin = note.split("\n")[0]
    (folder / "checkpoint").write_text(note.replace(origin, "flowledger/someone-else"))
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code != 0 and "not of this ledger" in out, out
    lines = note.split("\n")
    lines[2] = "A" * 43 + "="
    (folder / "checkpoint").write_text("\n".join(lines))
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code != 0 and "rewritten or forked" in out, out
    (folder / "checkpoint").write_text(note.replace("\n4\n", "\n40\n"))
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code != 0 and "events were removed" in out, out
    (folder / "checkpoint").write_bytes(b"\xff\xfe")
    code, out = cli("tiles", str(folder), "--db", db_url)
    assert code != 0 and len(out.strip().splitlines()) == 1, out


def test_tiles_into_a_path_that_is_a_file_is_one_line(
    store: Store, db_url: str, configured_signer: Signer, tmp_path: Path
) -> None:
    work(Ledger(store, clock=FakeClock()), "invoice:1")
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, out = cli("tiles", str(blocker), "--db", db_url)
    assert code != 0 and len(out.strip().splitlines()) == 1 and "Traceback" not in out, out
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        code, out = cli("tiles", str(locked), "--db", db_url)
        assert code != 0 and "cannot write" in out, out
