"""``verify --deep``'s check of the API tokens: each row of ``api_tokens`` against the events
that created and revoked it (``token_created``, ``token_revoked``). A token inserted behind the
ledger's back, a scope raised, a revocation undone or a token whose creation was struck from
the log each leave a row that no event accounts for."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import ApiToken, Event, table
from flowledger.storage.reads import Connection

EVENTS = table(Event)
TOKENS = table(ApiToken)
KINDS = ("token_created", "token_revoked")


def token_findings(conn: Connection, add: Callable[[str, str | None, Any, Any, str], None]) -> int:
    """Compare every token row with its events; ``add(what, column, stored, expected, note)``
    for each difference. The number of tokens compared."""
    expected: dict[str, dict[str, Any]] = {}
    rows = conn.execute(
        sa.select(EVENTS.c.seq, EVENTS.c.at, EVENTS.c.kind, EVENTS.c.data)
        .where(EVENTS.c.kind.in_(KINDS))
        .order_by(EVENTS.c.seq)
    )
    for seq, at, kind, raw in rows:
        try:
            data = json.loads(raw)
            name = data["name"]
        except (ValueError, KeyError, TypeError):
            add(f"event {seq}", None, None, None, f"a {kind} event that names no token")
            continue
        if kind == "token_created":
            expected[name] = {
                "scope": data.get("scope"),
                "signing": data.get("signing"),
                "created_at": at,
                "revoked_at": None,
            }
        elif name in expected:
            expected[name]["revoked_at"] = at
        else:
            add(f"token {name}", None, None, None, f"revoked by event {seq}, created by none")
    stored = conn.execute(
        sa.select(
            TOKENS.c.name,
            TOKENS.c.scope,
            TOKENS.c.signing_secret.is_not(None).label("signing"),
            TOKENS.c.created_at,
            TOKENS.c.revoked_at,
        ).order_by(TOKENS.c.name)
    ).all()
    for row in stored:
        want = expected.pop(row.name, None)
        if want is None:
            add(f"token {row.name}", None, None, None, "no event records this token")
            continue
        for column, value in want.items():
            if column == "signing" and value is None:
                continue  # a creation logged before events said whether the token signs
            if getattr(row, column) != value:
                add(f"token {row.name}", column, getattr(row, column), value, "")
    for name in expected:
        add(f"token {name}", None, None, None, "an event created it, but it is not stored")
    return len(stored)
