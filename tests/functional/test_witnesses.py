"""Witnesses (C2SP tlog-witness) against the ledger: each checkpoint cosigned and kept with
it, the proof sent from the size the witness last cosigned; a fork (two copies grown apart,
one witness) and a truncation (the last events deleted, the head rolled back) refused by the
witness and raised as an alarm in status, doctor and the alerts; a witness's hostile or broken
answers kept as its last error, never an alarm. The witness runs in-process through
Starlette's TestClient (an httpx.Client), or on a real socket under uvicorn."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import runpy
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.from_thread
import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from flowledger.cli import app as cli_app
from flowledger.config import WitnessConfig
from flowledger.domain.checkpoints import Signer, open_checkpoint, unverified_checkpoint
from flowledger.domain.cosignatures import Cosigner, cosignatures
from flowledger.domain.witnessing import SIZE_TYPE, Submission
from flowledger.programs.witness import create_witness_app
from flowledger.reports.bundle import write_bundle
from flowledger.scheduled.witnesses import Witnesses
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.services.witness_refusals import CLEARED
from flowledger.storage import witnesses as kept
from flowledger.storage.engine import Store, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import Outbox, table
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.storage.reads.witnesses import cosigned_note, latest_cosigned, refusals
from flowledger.storage.witness_state import WitnessState
from tests.support.builders import FakeClock, req
from tests.support.database import truncate_chain
from tests.support.receiver import uvicorn_thread

URL = "http://witness.test"
runner = CliRunner()


def work(store: Store, *names: str) -> None:
    ledger = Ledger(store, clock=FakeClock())
    for name in names:
        ledger.dispatch(name, req(f"exec-{name}")).run("token:n8n")
        ledger.confirm(name, f"R-{name}", execution_id=f"exec-{name}").run("token:n8n")


class Bridge(httpx.BaseTransport):
    """A plain httpx.Client's requests to an ASGI app in its own event loop (a portal)."""

    def __init__(self, app: Any, portal: anyio.from_thread.BlockingPortal) -> None:
        self.asgi = httpx.ASGITransport(app=app)
        self.portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()

        async def call() -> httpx.Response:
            sent = httpx.Request(request.method, request.url, content=content)
            answer = await self.asgi.handle_async_request(sent)
            data = await answer.aread()
            return httpx.Response(answer.status_code, headers=answer.headers, content=data)

        return self.portal.call(call)


@pytest.fixture(scope="module")
def portal() -> Iterator[anyio.from_thread.BlockingPortal]:
    with anyio.from_thread.start_blocking_portal() as running:
        yield running


class Witness:
    """A witness of its own: its key, its state file, its app, a client to it."""

    def __init__(
        self,
        folder: Path,
        log: Signer,
        portal: anyio.from_thread.BlockingPortal,
        cosigner: Cosigner | None = None,
    ) -> None:
        self.cosigner = cosigner or Cosigner("witness.example/w1", Ed25519PrivateKey.generate())
        folder.mkdir(exist_ok=True)
        self.state = WitnessState(folder / "witness.db")
        self.clock = 1_800_000_000
        self.app = create_witness_app(
            self.state, self.cosigner, [log.verifier], clock=lambda: self.clock
        )
        self.client = httpx.Client(transport=Bridge(self.app, portal), base_url=URL)

    @property
    def config(self) -> WitnessConfig:
        return WitnessConfig(url=URL, vkey=self.cosigner.verifier.text())

    def holds(self, origin: str) -> int:
        note = self.state.latest(origin)
        return -1 if note is None else unverified_checkpoint(note).size


@pytest.fixture
def db(db_url: str) -> Iterator[str]:
    store, _ = init_ledger(db_url)
    work(store, "invoice:1", "invoice:2", "invoice:3")
    store.dispose()
    return db_url


@pytest.fixture
def signer(db: str, tmp_path: Path) -> Signer:
    store = open_store(db)
    try:
        return create_key(tmp_path / "checkpoint.key", proofs.ledger_origin(store))
    finally:
        store.dispose()


@pytest.fixture
def witness(tmp_path: Path, signer: Signer, portal: anyio.from_thread.BlockingPortal) -> Witness:
    return Witness(tmp_path, signer, portal)


def send(db: str, signer: Signer, *witnesses: Witness, alerts: tuple[str, ...] = (), **kw: object):  # type: ignore[no-untyped-def]
    """One checkpoint of the ledger ``db`` sent to ``witnesses`` (all on one client)."""
    store = open_store(db)
    client = kw.pop("client", None) or witnesses[0].client
    try:
        sender = Witnesses(
            store,
            signer,
            [w.config for w in witnesses],
            alerts,
            client=client,  # type: ignore[arg-type]
        )
        return sender.checkpoint()
    finally:
        store.dispose()


def test_a_checkpoint_is_cosigned_and_kept_with_it(
    db: str, signer: Signer, witness: Witness
) -> None:
    done = send(db, signer, witness)
    assert [a.outcome for a in done.answers] == ["cosigned"]
    cp = open_checkpoint(done.note, signer.verifier)
    [cosig] = cosignatures(done.note, [witness.cosigner.verifier])
    assert cosig.timestamp == witness.clock
    at = datetime.fromtimestamp(witness.clock, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert done.answers[0].line() == f"witness {witness.cosigner.name}: cosigned at {at}"
    assert witness.holds(signer.name) == cp.size
    store = open_store(db)
    try:
        assert cosigned_note(store, cp.size) == done.note
        assert latest_cosigned(store, 1, [witness.config.vkey]) == done.note
        assert latest_cosigned(store, cp.size + 1, [witness.config.vkey]) is None
        assert latest_cosigned(store, 1, [witness.config.vkey, "other+00000000+AAAA"]) is None
        assert kept.seen_size(store, witness.config.vkey) == cp.size
        work(store, "invoice:4", "invoice:5")
    finally:
        store.dispose()
    # The next goes with the proof from the size the witness cosigned.
    later = send(db, signer, witness)
    assert [a.outcome for a in later.answers] == ["cosigned"]
    assert witness.holds(signer.name) == unverified_checkpoint(later.note).size > cp.size
    # The witness serves what it cosigned last, its cosignature and the log's on it.
    origin_hash = hashlib.sha256(signer.name.encode()).hexdigest()
    served = witness.client.get(f"/{origin_hash}/checkpoint")
    assert served.status_code == 200 and served.text == later.note
    assert witness.client.get(f"/{'0' * 64}/checkpoint").status_code == 404


def test_the_fork_two_copies_grown_apart_the_second_is_refused_and_raised(
    sqlite_url: str, tmp_path: Path, portal: anyio.from_thread.BlockingPortal
) -> None:
    store, _ = init_ledger(sqlite_url)
    work(store, "invoice:1", "invoice:2")
    signer = create_key(tmp_path / "checkpoint.key", proofs.ledger_origin(store))
    store.dispose()
    witness = Witness(tmp_path, signer, portal)
    original = sqlite_url
    first = send(original, signer, witness)
    assert first.cosigned == 1
    copy = tmp_path / "copy.db"
    with sqlite3.connect(original.removeprefix("sqlite:///")) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    for db, name in ((original, "invoice:a"), (str(copy), "invoice:b")):
        store = open_store(db)
        work(store, name)
        store.dispose()
    assert send(original, signer, witness).cosigned == 1
    # The copy has as many events, others: the witness holds the original's size, the copy
    # sends the proof from it, and the proof does not lead to the root the witness holds.
    done = send(str(copy), signer, witness, alerts=("https://alerts.example/hook",))
    [answer] = done.answers
    assert answer.outcome == "refused" and "rewritten or forked" in answer.detail
    store = open_store(str(copy))
    try:
        [refusal] = refusals(store)
        assert refusal.refused_size == unverified_checkpoint(done.note).size
        with store.reader.connect() as conn:
            rows = conn.execute(table(Outbox).select()).all()
        [row] = [r for r in rows if r.kind == "witness_refused"]
        body = json.loads(row.payload)["body"]
        assert body["witness"] == "witness.example/w1" and "forked" in body["reason"]
    finally:
        store.dispose()
    # The alarm stands in status (text and JSON), in doctor (exit 1), and for the checkpoint
    # command (exit 1); a second refusal does not queue a second alert.
    result = runner.invoke(cli_app, ["status", "--db", str(copy)])
    assert "WITNESS ALARM: witness.example/w1 refused the checkpoint" in result.stdout
    result = runner.invoke(cli_app, ["status", "--db", str(copy), "--json"])
    [alarm] = json.loads(result.stdout)["witness_alarms"]
    assert alarm["witness"] == "witness.example/w1"
    result = runner.invoke(cli_app, ["doctor", "--db", str(copy)])
    assert result.exit_code == 1 and "witnesses:       WITNESS ALARM" in result.stdout
    assert send(str(copy), signer, witness).answers[0].outcome == "refused"
    store = open_store(str(copy))
    try:
        with store.reader.connect() as conn:
            rows = conn.execute(table(Outbox).select()).all()
        assert len([r for r in rows if r.kind == "witness_refused"]) == 1
    finally:
        store.dispose()
    # Cleared by a person, the alarm ends; the witness still holds the original's history.
    clear = ["witness", "clear", "witness.example/w1", "--db", str(copy)]
    result = runner.invoke(cli_app, clear)
    assert result.exit_code == 2 and "give --note TEXT" in result.stderr
    result = runner.invoke(cli_app, [*clear, "--note", "  "])
    assert result.exit_code != 0 and "note" in result.stderr
    result = runner.invoke(
        cli_app, [*clear, "--note", "restored from last night's backup", "--operator", "ada"]
    )
    assert result.exit_code == 0, result.stderr
    assert "recorded for ada" in result.stdout
    # The clearing is in the log, under the operator's name, with the note.
    result = runner.invoke(cli_app, ["export", "--db", str(copy)])
    [event] = [e for e in map(json.loads, result.stdout.splitlines()) if e["kind"] == CLEARED]
    assert event["actor"] == "operator:ada"
    assert event["data"]["note"] == "restored from last night's backup"
    assert event["data"]["witness"] == witness.config.vkey and event["data"]["refusal"]
    result = runner.invoke(cli_app, [*clear, "--note", "again"])
    assert result.exit_code != 0 and "no refusal of a witness" in result.stderr
    result = runner.invoke(cli_app, ["doctor", "--db", str(copy)])
    assert result.exit_code == 0 and "WITNESS ALARM" not in result.stdout


def test_a_copy_behind_the_witness_is_refused_as_a_truncation(
    sqlite_url: str, tmp_path: Path, portal: anyio.from_thread.BlockingPortal
) -> None:
    store, _ = init_ledger(sqlite_url)
    work(store, "invoice:1")
    signer = create_key(tmp_path / "checkpoint.key", proofs.ledger_origin(store))
    store.dispose()
    witness = Witness(tmp_path, signer, portal)
    copy = tmp_path / "copy.db"
    with (
        sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as src,
        sqlite3.connect(copy) as dst,
    ):
        src.backup(dst)
    store = open_store(sqlite_url)
    work(store, "invoice:2", "invoice:3")
    store.dispose()
    assert send(sqlite_url, signer, witness).cosigned == 1
    [answer] = send(str(copy), signer, witness).answers
    assert answer.outcome == "refused" and "events were removed" in answer.detail


def test_a_truncation_is_caught_by_the_witness_on_the_next_checkpoint(
    db: str, signer: Signer, witness: Witness
) -> None:
    before = unverified_checkpoint(send(db, signer, witness).note).size
    truncate_chain(db, before - 2)  # the last events deleted, the head rolled back
    [answer] = send(db, signer, witness).answers
    assert answer.outcome == "refused"
    assert f"it has cosigned {before} events of this log, the ledger has {before - 2}" in (
        answer.detail
    )
    store = open_store(db)
    try:
        [refusal] = refusals(store)
        assert refusal.refused_size == before - 2
        # Grown past the size the witness holds, the rewritten log is still refused.
        work(store, "invoice:x", "invoice:y")
    finally:
        store.dispose()
    [answer] = send(db, signer, witness).answers
    assert answer.outcome == "refused" and "rewritten or forked" in answer.detail
    assert witness.holds(signer.name) == before


def test_a_witness_that_lost_its_state_is_sent_the_checkpoint_from_what_it_says(
    db: str,
    signer: Signer,
    witness: Witness,
    tmp_path: Path,
    portal: anyio.from_thread.BlockingPortal,
) -> None:
    assert send(db, signer, witness).cosigned == 1
    fresh = Witness(tmp_path / "elsewhere", signer, portal, witness.cosigner)
    # The ledger thinks the witness holds its size; the witness answers 409 with 0, and the
    # ledger sends it again from there.
    assert send(db, signer, fresh).cosigned == 1
    assert fresh.holds(signer.name) == witness.holds(signer.name)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (httpx.Response(200, text="garbage\n"), "not a signature line"),
        (httpx.Response(200, text=""), "no cosignature by its key"),
        (httpx.Response(500, text="boom"), "answered 500: boom"),
        (httpx.Response(403, text="\x1b[31mred\n"), "answered 403: \\x1b[31mred"),
        (httpx.Response(409, text="not a size\n"), "answered 409"),
        (httpx.Response(200, text="x" * 200_000), "not a cosignature"),
    ],
)
def test_a_witness_that_answers_no_cosignature_is_an_error_not_an_alarm(
    db: str, signer: Signer, witness: Witness, answer: httpx.Response, says: str
) -> None:
    client = httpx.Client(transport=httpx.MockTransport(lambda request: answer))
    [got] = send(db, signer, witness, client=client).answers
    assert got.outcome == "failed" and says in got.detail
    store = open_store(db)
    try:
        assert refusals(store) == []
        assert says in (kept.last_error(store, witness.config.vkey) or "")
    finally:
        store.dispose()


def test_a_cosignature_by_another_key_or_of_another_checkpoint_is_not_kept(
    db: str, signer: Signer, witness: Witness
) -> None:
    impostor = Cosigner(witness.cosigner.name, Ed25519PrivateKey.generate())

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=impostor.cosign("x\n1\nAAAA\n", 5))

    client = httpx.Client(transport=httpx.MockTransport(answer))
    [got] = send(db, signer, witness, client=client).answers
    assert got.outcome == "failed" and "no cosignature by its key" in got.detail

    def forged(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=witness.cosigner.cosign("other\n1\nAAAA\n", 5))

    client = httpx.Client(transport=httpx.MockTransport(forged))
    [got] = send(db, signer, witness, client=client).answers
    assert got.outcome == "failed" and "does not verify" in got.detail


def test_an_unreachable_witness_is_an_error(db: str, signer: Signer, witness: Witness) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(down))
    [got] = send(db, signer, witness, client=client).answers
    said = f"not reached: {witness.config.url}: connection refused"
    assert got.outcome == "failed" and got.detail == said
    assert got.line() == f"witness {witness.cosigner.name}: {said}"
    store = open_store(db)
    try:
        assert kept.last_error(store, witness.config.vkey) == said
    finally:
        store.dispose()
    # doctor: a witness never reached has cosigned nothing yet (not "cosigned up to 0").
    result = runner.invoke(cli_app, ["doctor", "--db", db])
    assert (
        f"witness.example/w1 has cosigned no checkpoint yet (last error: {said})" in result.stdout
    ), result.stdout


# -- the witness's endpoint, with hostile requests ----------------------------------------


def body(old: int, note: str, proof: list[bytes] | None = None) -> bytes:
    return Submission(old, proof or [], note).body()


def test_the_witness_endpoint_answers_each_refusal_with_its_status(
    witness: Witness, signer: Signer
) -> None:
    post = witness.client.post
    root = bytes(32)
    note5 = signer.sign(f"{signer.name}\n5\n{'A' * 43}=\n")
    too_big = post("/add-checkpoint", content=b"old 0\n\n" + b"x" * 200_000)
    assert too_big.status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(300):
            yield b"x" * 1000

    assert post("/add-checkpoint", content=chunks()).status_code == 413
    assert post("/add-checkpoint", content=b"old 0\n\nnot a note").status_code == 400
    assert post("/add-checkpoint", content=b"old 0\n!!!!\n\n" + note5.encode()).status_code == 400
    huge = post("/add-checkpoint", content=b"old 99999999999999999999999\n\n" + note5.encode())
    assert huge.status_code == 400 and "`old <size>`" in huge.text
    stranger = Signer(signer.name, Ed25519PrivateKey.generate())
    wrong_key = post(
        "/add-checkpoint", content=body(0, stranger.sign(f"{signer.name}\n5\n{'A' * 43}=\n"))
    )
    assert wrong_key.status_code == 403
    other_log = Signer("flowledger/other", Ed25519PrivateKey.generate())
    unknown = post(
        "/add-checkpoint", content=body(0, other_log.sign(f"flowledger/other\n5\n{'A' * 43}=\n"))
    )
    assert unknown.status_code == 404
    assert post("/add-checkpoint", content=body(0, note5)).status_code == 200
    stale = post("/add-checkpoint", content=body(3, note5))
    assert stale.status_code == 409 and stale.text == "5\n"
    assert stale.headers["content-type"] == SIZE_TYPE
    note7 = signer.sign(f"{signer.name}\n7\n{'B' * 43}=\n")
    for proof in ([], [root], [root] * 5):
        bad = post("/add-checkpoint", content=body(5, note7, proof))
        assert bad.status_code == 422, proof
    high = signer.sign(f"{signer.name}\n9223372036854775807\n{'B' * 43}=\n")
    assert post("/add-checkpoint", content=body(5, high, [root] * 63)).status_code == 422
    assert post("/add-checkpoint", content=body(5, note7, [root] * 64)).status_code == 400
    assert witness.holds(signer.name) == 5
    assert witness.client.get("/add-checkpoint").status_code == 405


def test_two_requests_at_once_from_one_size_one_is_cosigned(
    witness: Witness, signer: Signer
) -> None:
    """The compare-and-swap on the size: of two requests from size 0 only one is cosigned,
    the other is told the size the first left (on a real socket, each in its thread)."""
    notes = [signer.sign(f"{signer.name}\n{n}\n{'A' * 43}=\n") for n in (5, 6)]
    results: list[httpx.Response] = []
    with uvicorn_thread(witness.app) as running:  # type: ignore[arg-type]
        start = threading.Barrier(2)

        def go(note: str) -> None:
            with httpx.Client(base_url=running.url) as client:
                start.wait()
                results.append(client.post("/add-checkpoint", content=body(0, note)))

        threads = [threading.Thread(target=go, args=(n,)) for n in notes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 409]
    held = witness.holds(signer.name)
    assert [r.text for r in results if r.status_code == 409] == [f"{held}\n"]


def test_a_ledger_and_a_witness_on_real_sockets(db: str, signer: Signer, witness: Witness) -> None:
    with uvicorn_thread(witness.app) as running:  # type: ignore[arg-type]
        config = WitnessConfig(url=running.url, vkey=witness.cosigner.verifier.text())
        store = open_store(db)
        try:
            sender = Witnesses(store, signer, [config])
            try:
                done = sender.checkpoint()
                assert sender.run() is None  # nothing new: the job sends nothing
                work(store, "invoice:9")
                assert sender.run() is not None
            finally:
                sender.close()
        finally:
            store.dispose()
    assert [a.outcome for a in done.answers] == ["cosigned"]
    assert cosignatures(done.note, [witness.cosigner.verifier])


async def test_the_terminal_ui_raises_a_witness_refusal(
    db: str, signer: Signer, witness: Witness
) -> None:
    from flowledger.tui import make_app
    from tests.support.tui import settle

    before = unverified_checkpoint(send(db, signer, witness).note).size
    truncate_chain(db, before - 1)
    assert send(db, signer, witness).answers[0].outcome == "refused"
    store = open_store(db)
    try:
        tui = make_app(Ledger(store), operator="dana", refresh_seconds=None)
        async with tui.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "WITNESS ALARM" in tui.sub_title
            assert tui.last_message.startswith(
                f"WITNESS ALARM: witness.example/w1 refused the checkpoint of {before - 1} events"
            )
    finally:
        store.dispose()


async def test_a_refusal_while_the_terminal_ui_is_open_shows_at_its_next_refresh(
    db: str, signer: Signer, witness: Witness
) -> None:
    """The UI is open on the desk when the witness refuses: the next refresh raises the
    alarm (the header's mark and the message), and a person's ``witness clear`` ends it."""
    from flowledger.tui import make_app
    from tests.support.tui import settle

    before = unverified_checkpoint(send(db, signer, witness).note).size
    store = open_store(db)
    try:
        tui = make_app(Ledger(store), operator="dana", refresh_seconds=None)
        async with tui.run_test(size=(120, 40), notifications=True) as pilot:
            await settle(pilot)
            assert "WITNESS ALARM" not in tui.sub_title
            truncate_chain(db, before - 1)
            assert send(db, signer, witness).answers[0].outcome == "refused"
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert "WITNESS ALARM" in tui.sub_title
            assert tui.last_message.startswith("WITNESS ALARM: witness.example/w1 refused")
            assert tui.screen.query("Toast")
            clear = ["witness", "clear", "witness.example/w1", "--db", db, "--note", "seen"]
            assert CliRunner().invoke(cli_app, clear).exit_code == 0
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert "WITNESS ALARM" not in tui.sub_title
            assert tui.sub_title == "operator dana"
            assert not tui.screen.query("Toast")  # the cleared alarm's message went with it
    finally:
        store.dispose()


def test_a_cosignature_whose_answer_was_lost_is_got_again(
    db: str, signer: Signer, witness: Witness
) -> None:
    """The witness stored the checkpoint, its answer never reached the ledger (a crash, a
    timeout): the next request is told the size the witness holds, sent again from there, and
    cosigned."""
    first = send(db, signer, witness)
    store = open_store(db)
    try:
        work(store, "invoice:7")
        size = unverified_checkpoint(first.note).size
        with store.reader.connect() as conn:
            cp = proofs.tree_head(conn)
        note = signer.sign(cp.text())
        proof = proofs.consistency_hashes(store, size, cp.size)
    finally:
        store.dispose()
    lost = witness.client.post("/add-checkpoint", content=Submission(size, proof, note).body())
    assert lost.status_code == 200 and witness.holds(signer.name) == cp.size
    done = send(db, signer, witness)
    assert done.cosigned == 1 and cosignatures(done.note, [witness.cosigner.verifier])


def test_a_bundle_carries_the_cosigned_checkpoint_its_verifier_counts(
    db: str, signer: Signer, witness: Witness, tmp_path: Path
) -> None:
    done = send(db, signer, witness)
    vkey = witness.config.vkey
    store = open_store(db)
    try:
        # Without a note given, the bundle's checkpoint is the one the witness cosigned.
        write_bundle(store, signer, tmp_path / "plain", ["invoice:2"], witnesses=[vkey])
        assert (tmp_path / "plain" / "checkpoint").read_text() == done.note
        write_bundle(store, signer, tmp_path / "b", ["invoice:2"], note=done.note)
    finally:
        store.dispose()
    out = tmp_path / "plain"
    assert (out / "witnesses.vkeys").read_text() == vkey + "\n"
    assert not (tmp_path / "b" / "witnesses.vkeys").exists()
    verifier = runpy.run_path(str(out / "verify_bundle.py"))
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        assert verifier["main"]([str(out)]) == 0
    assert f"cosigned by 1 of 1 witnesses: {witness.cosigner.name}" in said.getvalue()
    # Two asked of one witness's cosignature: not enough; a witness given that did not cosign.
    other = Cosigner("witness.example/w2", Ed25519PrivateKey.generate()).verifier.text()
    with contextlib.redirect_stdout(said):
        assert (
            verifier["main"]([str(out), "--witness", vkey, "--witness", other, "--quorum", "2"])
            == 1
        )
    assert (
        "cosigned by 1 of the witnesses given, 2 required: missing witness.example/w2 "
        "(cosigned by witness.example/w1)" in said.getvalue()
    )
    with contextlib.redirect_stdout(said):
        assert (
            verifier["main"]([str(out), "--witness", vkey, "--witness", other, "--quorum", "1"])
            == 0
        )
    # A log key where a witness key is expected is refused before anything is checked.
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert verifier["main"]([str(out), "--witness", signer.verifier.text()]) == 2
    assert "is not a witness's key" in err.getvalue()
    # A cosignature altered by one byte fails the bundle, naming whose.
    note = done.note.splitlines(keepends=True)
    line = note[-1]
    name, sig = line[2:].split(" ")
    raw = bytearray(base64.b64decode(sig))
    raw[-1] ^= 1
    note[-1] = f"\u2014 {name} {base64.b64encode(bytes(raw)).decode()}\n"
    (out / "checkpoint").write_text("".join(note))
    with contextlib.redirect_stdout(said):
        assert verifier["main"]([str(out)]) == 1
    assert f"the cosignature by {witness.cosigner.name} does not verify" in said.getvalue()
