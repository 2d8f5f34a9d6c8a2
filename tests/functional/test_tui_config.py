"""A broken ``flowledger.toml`` does not keep the person on shift out of the terminal UI: it
opens on the defaults, and the Sources tab says what is wrong and that sync is off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ledger.cli import app as cli
from ledger.storage.engine import Store
from tests.support.tui import settle
from tui import FlowledgerApp
from tui.panes import SourcesPane

BROKEN = '[[sources]]\nname = "prod"\nkind = "n8n"\nbaseurl = "http://n8n.test"\n'


@pytest.fixture
def built_by_the_command(
    demo_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FlowledgerApp:
    """The app ``flowledger tui`` builds with a broken config file, caught before it runs."""
    config = tmp_path / "flowledger.toml"
    config.write_text(BROKEN)
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(config))
    built: list[FlowledgerApp] = []
    monkeypatch.setattr(FlowledgerApp, "run", lambda self, *a, **kw: built.append(self))
    result = CliRunner().invoke(cli, ["tui", "--db", str(demo_store.url.database)])
    assert result.exit_code == 0, result.output
    assert result.output == ""
    (made,) = built
    return made


async def test_a_broken_config_opens_the_ui_and_the_sources_tab_says_so(
    built_by_the_command: FlowledgerApp,
) -> None:
    app = built_by_the_command
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert "CONFIG BROKEN" in app.sub_title
        await pilot.press("3")
        await settle(pilot)
        pane = app.screen.query_one(SourcesPane)
        notice = str(pane.query_one("#config-error").render())
        assert "sources.0.baseurl: unknown key; did you mean 'base_url'?" in notice
        assert "sync is off until it is fixed" in notice
        assert "\n" not in notice
        assert pane.query_one("DataTable").row_count > 0  # the ledger's sources are still listed


async def test_a_good_config_shows_no_notice(app_factory: Any) -> None:
    app = app_factory()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        assert not app.screen.query_one(SourcesPane).query("#config-error")
        assert "CONFIG BROKEN" not in app.sub_title
