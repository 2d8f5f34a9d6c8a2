"""The terminal UI: what the ledger knows, for the person on duty. Holds no business rules:
every decision is a call on ``ledger.writer.services.Ledger``; every view is a read from
``ledger.reads``."""

from tui.app import FlowledgerApp, make_app

__all__ = ["FlowledgerApp", "make_app"]
