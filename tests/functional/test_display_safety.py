"""Text a workflow or a target sent, through every screen the ledger draws: ``show``, the
handover report and the terminal UI show its control, ESC and bidi characters as escapes, and
the report shows its Markdown link syntax as text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static
from typer.testing import CliRunner

from flowledger.cli.common import app
from flowledger.domain import FailOutcome, limits
from flowledger.receiver.api.schemas import N8nErrorCreate
from flowledger.reports import handover
from flowledger.services.ledger import Ledger
from flowledger.services.signing import create_key
from flowledger.storage.engine import open_store
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import tree_proofs as proofs
from flowledger.tui import FlowledgerApp
from tests.functional.test_tui import SIZE, plain
from tests.support.builders import SHIFT_END, FakeClock, req
from tests.support.cli import cli_workdir
from tests.support.tui import open_detail, settle

RECEIPT = "R\x1b[31mRED\x1b[0m\r\nfake line: state confirmed"
INPUT_REF = "https://x/y\x1b]0;owned\x07\x1b[2J\u202etxt.exe"
ERROR = "target said \x1b[2J\x1b[1A\x1b[2Kall fine \u202edetacilpud"
UNSAFE = ("\x1b", "\r", "\x07", "\u202e")
# What the n8n error hook receives when a target's reply is hostile: the message, the node's
# and the workflow's names all reach the hold's detail.
HOOK = {
    "execution": {
        "id": "exec-hook",
        "lastNodeExecuted": "Write\x1b[2K",
        "error": {"name": "NodeApiError", "message": ERROR},
    },
    "workflow": {"id": "wf", "name": "send\x1b]0;owned\x07 invoices"},
}
# The payloads' own sequences, none of which the ledger's screens ever draw themselves.
SEQUENCES = ("\x1b[2J", "\x1b[1A", "\x1b[2K", "\x1b[31m", "\x1b]0;", "\x07", "\r", "\u202e")


def confirmed_and_held(ledger: Ledger) -> None:
    """One operation confirmed with a hostile receipt and input_ref, one failed with a hostile
    error (an unknown outcome: a hold whose detail carries the error)."""
    ledger.dispatch("op:shown", req(input_ref=INPUT_REF)).run("workflow")
    ledger.confirm("op:shown", RECEIPT, execution_id="exec-1", detail=ERROR).run("workflow")
    ledger.dispatch("op:held", req("exec-2")).run("workflow")
    ledger.fail("op:held", FailOutcome.UNKNOWN, ERROR, execution_id="exec-2").run("workflow")
    ledger.dispatch("op:hooked", req("exec-hook")).run("workflow")
    ledger.execution_failed("exec-hook", N8nErrorCreate.model_validate(HOOK).detail()).run("n8n")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A ledger the CLI reads, holding :func:`confirmed_and_held`."""
    path = str(cli_workdir(tmp_path, monkeypatch, ""))
    store = open_store(path)
    confirmed_and_held(Ledger(store, clock=FakeClock()))
    store.dispose()
    return path


def test_show_prints_outside_text_as_escapes(db: str) -> None:
    shown = CliRunner().invoke(app, ["show", "op:shown", "--db", db])
    held = CliRunner().invoke(app, ["show", "op:held", "--db", db])
    hooked = CliRunner().invoke(app, ["show", "op:hooked", "--db", db])
    assert shown.exit_code == held.exit_code == hooked.exit_code == 0, shown.output + held.output
    for out in (shown.output, held.output, hooked.output):
        assert not any(c in out for c in UNSAFE)
    assert r"in workflow send\x1b]0;owned\x07 invoices (wf) at node Write\x1b[2K" in hooked.output
    assert r"R\x1b[31mRED\x1b[0m\r\nfake line: state confirmed" in shown.output
    assert r"https://x/y\x1b]0;owned\x07\x1b[2J\u202etxt.exe" in shown.output
    assert r"target said \x1b[2J\x1b[1A\x1b[2Kall fine \u202edetacilpud" in held.output
    assert "fake line" not in "".join(line.split(" ")[0] for line in shown.output.splitlines())


def test_export_writes_outside_text_as_json_escapes_and_keeps_it_exact(db: str) -> None:
    exported = CliRunner().invoke(app, ["export", "--db", db])
    assert exported.exit_code == 0, exported.output
    assert not any(c in exported.output for c in UNSAFE)
    # Each line is one JSON object, and what it carries is what was sent, character for
    # character: the escapes are JSON's, undone by any reader.
    events = [json.loads(line) for line in exported.output.splitlines()]
    texts = json.dumps([e["data"] for e in events], ensure_ascii=False)
    for sent in (RECEIPT, ERROR, HOOK["workflow"]["name"]):  # type: ignore[index]
        assert json.dumps(sent, ensure_ascii=False)[1:-1] in texts, sent


# An operation id an older ledger took (invisible characters are refused in new ones), and
# what a target may answer: C1 (a CSI and a NEL), DEL, a bidi override, invisible characters.
HIDDEN_ID = "op:INV-42\u200b:send"
HIDDEN = "R-7\x9b2J\x85\x7f\u202e\u200b\u2060\ufeff\xad\U000e0041"
HIDDEN_SHOWN = r"R-7\x9b2J\x85\x7f\u202e\u200b\u2060\ufeff\xad\U000e0041"
RAW = ("\x9b", "\x85", "\x7f", "\u202e", "\u200b", "\u2060", "\ufeff", "\xad", "\U000e0041")


@pytest.fixture
def hidden_db(db: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """:func:`db` with an operation whose id holds a zero-width space, dispatched with an
    ``input_ref`` and held after a failure whose error hold C1, DEL, bidi and invisible
    characters."""
    store = open_store(db)
    ledger = Ledger(store, clock=FakeClock())
    with monkeypatch.context() as m:
        m.setattr(limits, "operation_id_problem", lambda value: None)
        ledger.dispatch(HIDDEN_ID, req("exec-9", input_ref=HIDDEN)).run("workflow")
        ledger.fail(HIDDEN_ID, FailOutcome.UNKNOWN, HIDDEN, execution_id="exec-9").run("workflow")
    store.dispose()
    return db


@pytest.mark.parametrize("command", [["show", HIDDEN_ID], ["holds"], ["status"], ["handover"]])
def test_every_listing_shows_invisible_c1_and_delete_characters_as_escapes(
    hidden_db: str, command: list[str]
) -> None:
    out = CliRunner().invoke(app, [*command, "--db", hidden_db])
    assert out.exit_code == 0, out.output
    assert not any(c in out.output for c in RAW)
    shown = r"op:INV-42\\u200b:send" if command[0] == "handover" else r"op:INV-42\u200b:send"
    if command[0] != "status":  # the report's Markdown escapes the escape's backslash
        assert shown in out.output


@pytest.mark.parametrize(
    "command", [["proof", HIDDEN_ID], ["export"], ["show", "--json", HIDDEN_ID]]
)
def test_every_json_the_cli_prints_is_ascii_and_exact(
    hidden_db: str, tmp_path: Path, command: list[str]
) -> None:
    store = open_store(hidden_db)
    signer = create_key(tmp_path / "checkpoint.key", proofs.ledger_origin(store))
    (tmp_path / "checkpoint").write_text(proofs.signed_checkpoint(store, signer))
    store.dispose()
    extra = ["--checkpoint", str(tmp_path / "checkpoint")] if command[0] == "proof" else []
    out = CliRunner().invoke(app, [*command, "--db", hidden_db, *extra])
    assert out.exit_code == 0, out.output
    assert out.stdout.isascii()
    docs = [json.loads(line) for line in out.stdout.splitlines()] if command[0] == "export" else [
        json.loads(out.stdout)]  # fmt: skip
    texts = json.dumps(docs, ensure_ascii=False)
    assert json.dumps(HIDDEN, ensure_ascii=False)[1:-1] in texts


def test_the_handover_report_shows_outside_text_literally(ledger: Ledger, clock: FakeClock) -> None:
    ledger.dispatch("[click me](https://evil.example/)", req()).run("workflow")
    ledger.fail(
        "[click me](https://evil.example/)", FailOutcome.UNKNOWN, ERROR, execution_id="exec-1"
    ).run("workflow")
    hold = holds.hold_queue(ledger.store, clock.now, limit=1)[0]["id"]
    ledger.update_hold(
        hold, operator="bob", note="n", next_action="see <https://evil.example/> `x` \x1b[2J"
    ).run()
    text = handover.build(ledger.store, handover.Shift(clock.now, clock.now, "b\u202eob"))
    assert not any(c in text for c in UNSAFE)
    assert r"\[click me\](https://evil.example/)" in text
    assert r"see \<https://evil.example/\> \`x\` \\x1b\[2J" in text
    assert r"by b\\u202eob" in text


async def test_the_terminal_ui_shows_outside_text_as_escapes(app_factory, demo_ledger) -> None:
    confirmed_and_held(demo_ledger)
    hold = holds.hold_queue(
        demo_ledger.store,
        SHIFT_END,
        flt=holds.HoldFilter(words=("op:held",)),
    )[0]["id"]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, hold)
        screen = "".join(
            plain(app.screen.query_one(f"#detail-{part}", Static).content)
            for part in ("hold", "operation", "attempts")
        )
        assert not any(c in screen for c in UNSAFE)
        assert r"\x1b[2J\x1b[1A\x1b[2Kall" in screen.replace("\n", "").replace(" ", "")


def drawn(app: FlowledgerApp) -> str:
    """What the app writes to the terminal to draw its screen as it is now: every cell with
    the sequences that style and place it (the headless driver writes nothing itself)."""
    update: Any = app.screen._compositor.render_full_update()
    return str(update.render_segments(app.console))


async def test_no_sequence_a_hook_message_holds_reaches_the_terminal(
    app_factory, demo_ledger
) -> None:
    confirmed_and_held(demo_ledger)
    hold = holds.hold_queue(
        demo_ledger.store, SHIFT_END, flt=holds.HoldFilter(words=("op:hooked",))
    )[0]["id"]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        queue = drawn(app)
        await open_detail(pilot, hold)
        detail = drawn(app)
    assert "op:hooked" in queue and r"\x1b[2J\x1b[1A\x1b[2Kall" in detail
    for screen in (queue, detail):
        assert not [s for s in SEQUENCES if s in screen]


async def test_the_terminal_ui_shows_an_invisible_character_in_a_stored_id_as_an_escape(
    app_factory, demo_ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        m.setattr(limits, "operation_id_problem", lambda value: None)
        demo_ledger.dispatch(HIDDEN_ID, req("exec-9")).run("workflow")
        demo_ledger.fail(HIDDEN_ID, FailOutcome.UNKNOWN, HIDDEN, execution_id="exec-9").run("x")
    hold = holds.hold_queue(demo_ledger.store, SHIFT_END, flt=holds.HoldFilter(words=("INV-42",)))[
        0
    ]["id"]
    app = app_factory()
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, hold)
        detail = drawn(app)
    assert r"op:INV-42\u200b:send" in detail
    assert not [c for c in RAW if c in detail]
