"""API tokens as stored: a name, a scope, the token's SHA-256 and, for a token that signs, the
salt its signing secret is derived from (never the secret). What a token may do, and how its
secret is derived, is :mod:`flowledger.receiver.api.tokens`'s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from flowledger.storage.models import ApiToken, table

TOKENS = table(ApiToken)


def active(conn: sa.Connection) -> Sequence[sa.Row[Any, Any, Any, Any, Any]]:
    """The tokens not revoked: ``id``, ``name``, ``scope``, ``token_hash``, ``signing_secret``
    (the salt, or None)."""
    return conn.execute(
        sa.select(
            TOKENS.c.id,
            TOKENS.c.name,
            TOKENS.c.scope,
            TOKENS.c.token_hash,
            TOKENS.c.signing_secret,
        ).where(TOKENS.c.revoked_at.is_(None))
    ).all()


def signing_salts(conn: sa.Connection) -> list[str]:
    """The salts of the active tokens that sign."""
    salts = conn.execute(
        sa.select(TOKENS.c.signing_secret).where(
            TOKENS.c.signing_secret.is_not(None), TOKENS.c.revoked_at.is_(None)
        )
    ).scalars()
    return list(salts)


def listed(conn: sa.Connection) -> list[dict[str, Any]]:
    """Every token by name, revoked ones included: name, scope, created_at, last_used_at,
    revoked_at and ``signing`` (whether it signs); never its hash or salt."""
    cols = [TOKENS.c[c] for c in ("name", "scope", "created_at", "last_used_at", "revoked_at")]
    rows = conn.execute(
        sa.select(*cols, TOKENS.c.signing_secret.is_not(None).label("signing")).order_by(
            TOKENS.c.name
        )
    ).all()
    return [dict(r._mapping) for r in rows]


def name_taken(conn: sa.Connection, name: str) -> bool:
    """A token (active or revoked) is named ``name``."""
    return conn.execute(sa.select(TOKENS.c.id).where(TOKENS.c.name == name)).first() is not None


def insert(
    conn: sa.Connection,
    *,
    name: str,
    scope: str,
    token_hash: str,
    signing_salt: str | None,
    created_at: datetime,
) -> None:
    conn.execute(
        TOKENS.insert().values(
            name=name,
            scope=scope,
            token_hash=token_hash,
            signing_secret=signing_salt,
            created_at=created_at,
        )
    )


def revoke(conn: sa.Connection, name: str, at: datetime) -> bool:
    """Revoke the active token named ``name``; False when there is none."""
    done = conn.execute(
        TOKENS.update()
        .where(TOKENS.c.name == name, TOKENS.c.revoked_at.is_(None))
        .values(revoked_at=at)
    )
    return done.rowcount == 1


def record_use(conn: sa.Connection, token_id: int, at: datetime) -> None:
    """Move the token's ``last_used_at`` forward to ``at``, never back (several receivers may
    share the database)."""
    conn.execute(
        TOKENS.update()
        .where(
            TOKENS.c.id == token_id,
            sa.or_(TOKENS.c.last_used_at.is_(None), TOKENS.c.last_used_at < at),
        )
        .values(last_used_at=at)
    )
