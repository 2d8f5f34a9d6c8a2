"""Head anchoring: the ``anchors`` job publishes the chain head, and ``verify --anchors``
catches a chain rewritten or cut after a published head, which plain ``verify`` passes."""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.config import AlertsConfig, AnchorsConfig, FileConfig, load_config
from flowledger.domain.checkpoints import open_checkpoint
from flowledger.programs.runner import Runner
from flowledger.programs.verify_proof import main as verify_main
from flowledger.scheduled.alerts import Deliverer
from flowledger.scheduled.anchors import Publisher
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import Outbox, table
from flowledger.storage.reads.tree_proofs import ledger_origin
from tests.support.builders import FakeClock, req
from tests.support.database import rewrite_chain, truncate_chain

runner = CliRunner()
OUTBOX = table(Outbox)


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture
def anchor_file(tmp_path: Path) -> Path:
    outside = tmp_path / "kept-elsewhere"
    outside.mkdir()
    return outside / "anchors.jsonl"


@pytest.fixture
def ledger_url(db_url: str, tmp_path: Path) -> str:
    """The ledger in a directory of its own (SQLite), so the anchor file is outside it."""
    if "://" in db_url:
        return db_url
    (tmp_path / "db").mkdir()
    return str(tmp_path / "db" / "ledger.db")


def work(store: Store, clock: FakeClock, first: int, last: int) -> None:
    ledger = Ledger(store, clock=clock)
    for n in range(first, last + 1):
        ledger.dispatch(f"op:{n}", req(f"e{n}")).run("token:n8n")
        ledger.confirm(f"op:{n}", f"R-{n}").run("token:n8n")
        clock.advance(minutes=1)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def published(ledger_url: str, anchor_file: Path) -> str:
    """Ten events, a head published after six of them and another after all ten."""
    store, _ = init_ledger(ledger_url)
    clock = FakeClock()
    publisher = Publisher(store, AnchorsConfig(file=anchor_file), clock=clock)
    work(store, clock, 1, 3)
    assert publisher.publish() is not None
    work(store, clock, 4, 5)
    assert publisher.publish() is not None
    store.dispose()
    assert [a["seq"] for a in lines(anchor_file)] == [6, 10]
    return ledger_url


def test_the_job_appends_each_new_head_once(ledger_url: str, anchor_file: Path) -> None:
    store, _ = init_ledger(ledger_url)
    clock = FakeClock()
    publisher = Publisher(store, AnchorsConfig(file=anchor_file), clock=clock)
    first = publisher.publish()
    assert first is not None and first.seq == 0  # an empty chain has a head too
    work(store, clock, 1, 2)
    second = publisher.publish()
    assert publisher.publish() is None  # nothing moved: nothing written
    with store.reader.connect() as conn:
        head = conn.execute(sa.text("SELECT seq, hash FROM chain_head")).one()
    assert second is not None and (second.seq, second.hash) == (head.seq, head.hash)
    assert lines(anchor_file) == [
        {"at": "2026-11-02T09:00:00+00:00", "hash": first.hash, "seq": 0},
        {"at": "2026-11-02T09:02:00+00:00", "hash": head.hash, "seq": 4},
    ]
    assert stat.S_IMODE(anchor_file.stat().st_mode) == 0o600
    # A restarted process reads the last head back and does not publish it again.
    assert Publisher(store, AnchorsConfig(file=anchor_file), clock=clock).publish() is None
    store.dispose()


def test_plain_verify_passes_a_rewrite_that_the_anchors_catch(
    published: str, anchor_file: Path
) -> None:
    rewrite_chain(published, 3, {"receipt": "R-forged", "execution_id": None, "attempt": 1})
    assert cli("verify", "--db", published)[0] == 0  # the chain links up again
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file))
    assert code == 1, out
    assert "anchors.jsonl line 1: head seq 6 published 2026-11-02 09:03:00 UTC had hash" in out
    assert "anchors.jsonl line 2: head seq 10" in out and "the chain was rewritten" in out
    assert "anchors: 2 of 2 published heads disagree" in out


def test_a_truncation_after_a_published_head_is_caught(published: str, anchor_file: Path) -> None:
    truncate_chain(published, 8)
    assert cli("verify", "--db", published)[0] == 0
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file))
    assert code == 1
    assert "line 2: head seq 10 published 2026-11-02 09:05:00 UTC is beyond the chain's end" in out
    assert "(seq 8): events were removed" in out
    assert "line 1" not in out  # the head published at seq 6 still holds


def test_an_untouched_chain_agrees_with_every_anchor(published: str, anchor_file: Path) -> None:
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file), "--deep")
    assert code == 0, out
    assert "anchors ok: 2 published heads found in the chain" in out and "tables ok" in out


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "line 2: not a JSON object"),
        ('{"seq": -1, "hash": "' + "a" * 64 + '", "at": "2026-11-02T09:00:00Z"}', "line 2: seq"),
        ('{"seq": 1, "hash": "XYZ", "at": "2026-11-02T09:00:00Z"}', "line 2: hash must be 64"),
        ('{"seq": 1, "hash": "' + "a" * 64 + '", "at": "soon"}', "line 2: at 'soon' is not"),
    ],
)
def test_a_bad_anchor_line_is_named(
    published: str, anchor_file: Path, line: str, problem: str
) -> None:
    kept = anchor_file.read_text().splitlines()
    anchor_file.write_text(f"{kept[0]}\n{line}\n{kept[1]}\n")
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file))
    assert code == 2 and problem in out and "Traceback" not in out


def test_a_missing_or_empty_anchor_file_is_an_error(published: str, anchor_file: Path) -> None:
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file.with_name("no")))
    assert code == 2 and "cannot read the anchor file" in out
    anchor_file.write_text("\n")
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file))
    assert code == 2 and "holds no anchors" in out


def test_an_anchor_file_beside_the_database_is_refused(sqlite_url: str, tmp_path: Path) -> None:
    store, _ = init_ledger(sqlite_url)
    for inside in (tmp_path / "anchors.jsonl", tmp_path / "sub" / "anchors.jsonl"):
        with pytest.raises(LedgerError, match="inside the database's directory"):
            Publisher(store, AnchorsConfig(file=inside))
    with pytest.raises(LedgerError, match="does not exist"):
        Publisher(store, AnchorsConfig(file=tmp_path.parent / "nowhere-dir" / "a.jsonl"))
    store.dispose()


def test_run_refuses_an_anchor_file_beside_the_database(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init_ledger(sqlite_url)[0].dispose()
    config = tmp_path / "flowledger.toml"
    config.write_text(f'[anchors]\nfile = "{tmp_path / "anchors.jsonl"}"\n')
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    code, out = cli("run", "--db", sqlite_url, "--port", "0")
    assert code == 2 and "inside the database's directory" in out
    assert out.count("\n") == 1


def test_run_schedules_the_publisher_from_the_configuration(
    ledger_url: str, anchor_file: Path, tmp_path: Path
) -> None:
    config = tmp_path / "flowledger.toml"
    config.write_text(f'[anchors]\nfile = "{anchor_file}"\ninterval = "5m"\n')
    cfg = load_config(config)
    assert cfg.anchors.interval == timedelta(minutes=5)
    store, _ = init_ledger(ledger_url)
    built = Runner(store, Ledger(store), cfg)
    job = built.scheduler.jobs["anchors"]
    assert job.interval == timedelta(minutes=5) and job.needs_lease
    built.lease.renew()  # this process holds the lease, as the one running jobs does
    assert built.scheduler.run_job(job)  # as the scheduler runs it: the head is written
    assert [a["seq"] for a in lines(anchor_file)] == [0]
    built.close()
    store.dispose()
    assert "anchors" not in Runner(store, Ledger(store), FileConfig()).scheduler.jobs


def test_the_anchor_command_publishes_once(
    ledger_url: str, anchor_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init_ledger(ledger_url)[0].dispose()
    config = tmp_path / "flowledger.toml"
    config.write_text(f'[anchors]\nfile = "{anchor_file}"\n')
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    code, out = cli("anchor", "--once", "--db", ledger_url)
    assert code == 0 and out.startswith("published head seq 0 hash ")
    code, out = cli("anchor", "--once", "--db", ledger_url)
    assert code == 0 and "has not moved" in out
    config.write_text("")
    code, out = cli("anchor", "--once", "--db", ledger_url)
    assert code == 2 and "no [anchors] file or alerts configured" in out


def test_heads_go_to_the_alert_urls_through_the_outbox(ledger_url: str) -> None:
    store, _ = init_ledger(ledger_url)
    clock = FakeClock()
    urls = ["http://chat.example/hook"]
    publisher = Publisher(store, AnchorsConfig(alerts=True), urls, clock=clock)
    work(store, clock, 1, 1)
    anchor = publisher.publish()
    assert anchor is not None
    sent: list[httpx.Request] = []
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(204))
    )
    Deliverer(store, AlertsConfig(urls=urls), client=client, clock=clock).deliver_due()
    assert len(sent) == 1
    body = json.loads(sent[0].content)
    assert body["kind"] == "chain_head"
    assert body["head"] == {"at": "2026-11-02T09:01:00+00:00", "hash": anchor.hash, "seq": 2}
    assert sent[0].headers["X-Flowledger-Delivery"] == body["delivery_id"]
    with pytest.raises(LedgerError, match="needs \\[alerts\\] urls"):
        Publisher(store, AnchorsConfig(alerts=True), [])
    store.dispose()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[anchors]\nfile = "/"\n', "anchors.file: anchors file must name a file"),
        ('[anchors]\ninterval = "0s"\n', "anchors.interval"),
        ("[anchors]\nalert = true\n", "did you mean 'alerts'?"),
    ],
)
def test_bad_anchor_settings_name_the_key(tmp_path: Path, toml: str, message: str) -> None:
    config = tmp_path / "flowledger.toml"
    config.write_text(toml)
    with pytest.raises(LedgerError, match=message.replace("(", "\\(").replace("?", "\\?")):
        load_config(config)


def test_a_line_cut_short_stays_the_only_bad_line(published: str, anchor_file: Path) -> None:
    """A power loss mid-line: the next anchor starts a line of its own, and verify names the
    damaged line."""
    with anchor_file.open("a") as handle:
        handle.write('{"at": "2026-11-02T09:')
    store, _ = init_ledger(published)
    work(store, FakeClock(), 6, 6)
    assert Publisher(store, AnchorsConfig(file=anchor_file)).publish() is not None
    store.dispose()
    assert [len(line) > 60 for line in anchor_file.read_text().splitlines()] == [
        True, True, False, True,
    ]  # fmt: skip
    code, out = cli("verify", "--db", published, "--anchors", str(anchor_file))
    assert code == 2 and "anchors.jsonl line 3: not a JSON object" in out


def test_with_a_key_the_job_publishes_signed_checkpoints_and_old_lines_still_check(
    ledger_url: str, anchor_file: Path, tmp_path: Path
) -> None:
    store, _ = init_ledger(ledger_url)
    clock = FakeClock()
    work(store, clock, 1, 2)
    Publisher(store, AnchorsConfig(file=anchor_file), clock=clock).publish()  # no key: a head
    signer = create_key(tmp_path / "checkpoint.key", ledger_origin(store))
    publisher = Publisher(store, AnchorsConfig(file=anchor_file), clock=clock, signer=signer)
    work(store, clock, 3, 4)
    assert publisher.publish() is not None
    work(store, clock, 5, 5)
    assert publisher.publish() is not None
    store.dispose()
    old, first, second = lines(anchor_file)
    assert "checkpoint" not in old
    checkpoints = [open_checkpoint(str(a["checkpoint"]), signer.verifier) for a in (first, second)]
    assert [c.size for c in checkpoints] == [first["seq"], second["seq"]] == [8, 10]
    code, out = cli("verify", "--db", ledger_url, "--anchors", str(anchor_file))
    assert code == 0 and "anchors ok: 3 published heads found in the chain" in out, out
    # Two published checkpoints, proven consistent by the standalone verifier.
    for n, a in enumerate((first, second)):
        (tmp_path / f"cp{n}").write_text(str(a["checkpoint"]))
    proof = tmp_path / "consistency.json"
    code, out = cli(
        "proof", "--db", ledger_url, "--consistency", str(tmp_path / "cp0"), str(tmp_path / "cp1"),
        "--out", str(proof),
    )  # fmt: skip
    assert code == 0, out
    assert verify_main([str(proof), "--key", signer.verifier.text()]) == 0
