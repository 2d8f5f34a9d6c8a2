"""The ``flowledger`` command: one typer app, commands grouped by module."""

from __future__ import annotations

import ledger.cli.operator  # noqa: F401  (the tui, handover and demo commands)
from ledger.cli import database, inspect  # noqa: F401  (register their commands)
from ledger.cli.common import app


def main() -> None:
    app()
