"""The errors a person can fix, in a module of their own: the CLI catches them without loading
the database library."""

from __future__ import annotations


class LedgerError(Exception):
    """A problem a person can fix; its message is one line that says how."""


class Missing(LedgerError):
    """What was named by its id or name (an operation, a hold, a source, a token, a row to
    page on from) is not there; the message says what is."""
