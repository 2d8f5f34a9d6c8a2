"""Connectors do HTTP only: importing every one of them loads no database library and no
ledger module (they feed the services and import nothing from them)."""

from __future__ import annotations

import subprocess
import sys


def test_connectors_import_no_ledger_and_no_database() -> None:
    code = (
        "import sys, flowledger.connectors.registry, flowledger.connectors.http; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'sqlmodel', 'psycopg') "
        "or (m.startswith('flowledger.') and not m.startswith('flowledger.connectors'))]; "
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
