"""A broken ``flowledger.toml`` does not keep the person on shift out of the terminal UI: it
opens on the defaults, and the Sources tab says what is wrong and that sync is off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app as cli
from flowledger.storage.engine import Store
from flowledger.tui import FlowledgerApp
from flowledger.tui.panes.sources import SourcesPane
from tests.support.tui import settle

BROKEN = '[[sources]]\nname = "prod"\nkind = "n8n"\nbaseurl = "http://n8n.test"\n'


def built_by_the_command(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, *args: str
) -> FlowledgerApp:
    """The app ``flowledger tui`` builds, caught before it runs."""
    path = tmp_path / "flowledger.toml"
    path.write_text(config)
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(path))
    built: list[FlowledgerApp] = []
    monkeypatch.setattr(FlowledgerApp, "run", lambda self, *a, **kw: built.append(self))
    result = CliRunner().invoke(cli, ["tui", "--db", str(store.url.database), *args])
    assert result.exit_code == 0, result.output
    assert result.output == ""
    (made,) = built
    return made


async def test_a_broken_config_opens_the_ui_and_the_sources_tab_says_so(
    demo_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = built_by_the_command(demo_store, tmp_path, monkeypatch, BROKEN)
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


def test_out_names_the_folder_for_the_handover_key(
    demo_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = built_by_the_command(demo_store, tmp_path, monkeypatch, "", "--out", "shift")
    assert app.ctx.report_dir == tmp_path / "shift"
    assert app.ctx.config_error is None
