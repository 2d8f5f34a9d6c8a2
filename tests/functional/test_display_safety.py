"""Text a workflow or a target sent, through every screen the ledger draws: ``show``, the
handover report and the terminal UI show its control, ESC and bidi characters as escapes, and
the report shows its Markdown link syntax as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static
from typer.testing import CliRunner

from ledger.cli.common import app
from ledger.domain import FailOutcome
from ledger.reads import duty, handover
from ledger.storage.migrate import init_ledger
from ledger.writer.services import Ledger
from tests.functional.test_tui import SIZE, plain
from tests.support.builders import SHIFT_END, FakeClock, req
from tests.support.tui import open_detail

RECEIPT = "R\x1b[31mRED\x1b[0m\r\nfake line: state confirmed"
INPUT_REF = "https://x/y\x1b]0;owned\x07\x1b[2J\u202etxt.exe"
ERROR = "target said \x1b[2J\x1b[1A\x1b[2Kall fine \u202edetacilpud"
UNSAFE = ("\x1b", "\r", "\x07", "\u202e")


def confirmed_and_held(ledger: Ledger) -> None:
    """One operation confirmed with a hostile receipt and input_ref, one failed with a hostile
    error (an unknown outcome: a hold whose detail carries the error)."""
    ledger.dispatch("op:shown", req(input_ref=INPUT_REF)).run("workflow")
    ledger.confirm("op:shown", RECEIPT, execution_id="exec-1", detail=ERROR).run("workflow")
    ledger.dispatch("op:held", req("exec-2")).run("workflow")
    ledger.fail("op:held", FailOutcome.UNKNOWN, ERROR, execution_id="exec-2").run("workflow")


def test_show_prints_outside_text_as_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "flowledger.toml"
    config.write_text("")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    db = str(tmp_path / "ledger.db")
    store, _ = init_ledger(db)
    confirmed_and_held(Ledger(store, clock=FakeClock()))
    store.dispose()
    shown = CliRunner().invoke(app, ["show", "op:shown", "--db", db])
    held = CliRunner().invoke(app, ["show", "op:held", "--db", db])
    assert shown.exit_code == 0 and held.exit_code == 0, shown.output + held.output
    for out in (shown.output, held.output):
        assert not any(c in out for c in UNSAFE)
    assert r"R\x1b[31mRED\x1b[0m\r\nfake line: state confirmed" in shown.output
    assert r"https://x/y\x1b]0;owned\x07\x1b[2J\u202etxt.exe" in shown.output
    assert r"target said \x1b[2J\x1b[1A\x1b[2Kall fine \u202edetacilpud" in held.output
    assert "fake line" not in "".join(line.split(" ")[0] for line in shown.output.splitlines())


def test_the_handover_report_shows_outside_text_literally(ledger: Ledger, clock: FakeClock) -> None:
    ledger.dispatch("[click me](https://evil.example/)", req()).run("workflow")
    ledger.fail(
        "[click me](https://evil.example/)", FailOutcome.UNKNOWN, ERROR, execution_id="exec-1"
    ).run("workflow")
    hold = duty.hold_queue(ledger.store, clock.now, limit=1)[0]["id"]
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
    hold = duty.hold_queue(
        demo_ledger.store,
        SHIFT_END,
        flt=duty.HoldFilter(words=("op:held",)),
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
