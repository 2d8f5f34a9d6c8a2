"""A folder the CLI runs from: its ``flowledger.toml`` and a fresh ledger."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from tests.support.ledgers import new_ledger

# flowledger.toml's one n8n source, as the CLI's tests configure it (its key in the environment).
N8N_SOURCE = """
[[sources]]
name = "prod-n8n"
kind = "n8n"
base_url = "http://n8n.test"
api_key_env = "TEST_N8N_API_KEY"
"""


def cli_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, **env: str) -> Path:
    """``config`` as ``tmp_path/flowledger.toml`` and a ledger at ``tmp_path/ledger.db``
    (``FLOWLEDGER_DB``), the current folder ``tmp_path``, ``env`` set and no
    ``FLOWLEDGER_CONFIG`` from outside; returns the ledger's path."""
    (tmp_path / "flowledger.toml").write_text(config)
    db = tmp_path / "ledger.db"
    new_ledger(db).dispose()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_CONFIG", raising=False)
    monkeypatch.setenv("FLOWLEDGER_DB", str(db))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return db


def cli(*args: str) -> tuple[int, str, str]:
    """``flowledger ARGS`` in this process: its exit code, standard output and error."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
