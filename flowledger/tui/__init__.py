"""The terminal UI: what the ledger knows, for the person on duty. Holds no business rules:
every decision is a call on ``flowledger.services.ledger.Ledger``; every view is a read from
``flowledger.storage.reads`` (the handover report is built by ``flowledger.reports``)."""

from flowledger.tui.app import FlowledgerApp, make_app

__all__ = ["FlowledgerApp", "make_app"]
