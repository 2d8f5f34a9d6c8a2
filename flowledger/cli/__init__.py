"""The ``flowledger`` command: one typer app, commands grouped by module."""

from __future__ import annotations

from flowledger.cli import (  # noqa: F401  (register their commands)
    backups,
    database,
    holds,
    inspect,
    n8n,
    operator,
    proofs,
    receiver,
    scheduling,
    sources,
    witness,
)
from flowledger.cli.common import app


def main() -> None:
    app()
