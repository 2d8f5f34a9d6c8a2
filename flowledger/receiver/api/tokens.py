"""API tokens: created by the CLI, shown once, stored only as SHA-256 hashes.

A token with request signing also gets a signing secret. The ledger must be able to recompute
it to check signatures, yet the database must not hold it: the column keeps only a random salt
and the secret is ``HMAC(FLOWLEDGER_SECRET, salt)``. Someone with the database but not the
environment's secret can neither use the tokens nor forge signatures.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flowledger.domain.hashing import token_digest
from flowledger.services.ledger import Ledger, Tx
from flowledger.storage import tokens as stored_tokens
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.problems import Missing

SCOPES = ("write", "read", "operator")
TOKEN_PREFIX = "flt_"
_SALT_PREFIX = "kdf1:"
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the token's id (idempotency keys are scoped by it), name and scope."""

    token_id: int
    name: str
    scope: str
    signing_salt: str | None

    @property
    def actor(self) -> str:
        return f"token:{self.name}"

    def may(self, needed: str) -> bool:
        """``needed`` is a scope, or ``any`` for a route every valid token may call."""
        return needed == "any" or self.scope == "operator" or self.scope == needed


@dataclass(frozen=True)
class NewToken:
    name: str
    scope: str
    token: str
    signing_secret: str | None


def signing_key(server_secret: bytes, salt: str) -> bytes:
    return hmac.new(
        server_secret, b"flowledger-signing\x00" + salt.encode(), hashlib.sha256
    ).digest()


def signing_secrets(store: Store, server_secret: bytes | None) -> list[str]:
    """The active tokens' signing secrets as their holders know them, for the redactor (a
    workflow that echoes its own in an error message)."""
    if not server_secret:
        return []
    with store.reader.connect() as conn:
        salts = stored_tokens.signing_salts(conn)
    return [signing_key(server_secret, salt).hex() for salt in salts]


def create_token(
    ledger: Ledger, name: str, scope: str, *, signing: bool, server_secret: bytes | None
) -> NewToken:
    if not _NAME.match(name):
        raise LedgerError("a token name is 1 to 200 letters, digits or _.:@-")
    if scope not in SCOPES:
        raise LedgerError(f"scope must be one of {', '.join(SCOPES)}")
    if signing and not server_secret:
        raise LedgerError(
            "request signing needs FLOWLEDGER_SECRET (the signing secret is derived from it "
            "and never stored); set it here and for `flowledger serve`"
        )
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    salt = _SALT_PREFIX + secrets.token_hex(16) if signing else None

    def work(tx: Tx) -> None:
        if stored_tokens.name_taken(tx.conn, name):
            raise LedgerError(
                f"a token named {name!r} exists or existed (a name is taken once, revoked or "
                "not: the events name it); choose another name"
            )
        stored_tokens.insert(
            tx.conn,
            name=name,
            scope=scope,
            token_hash=token_digest(token),
            signing_salt=salt,
            created_at=tx.now,
        )
        tx.event("token_created", None, {"name": name, "scope": scope, "signing": signing})

    ledger.run("cli", work)
    secret = signing_key(server_secret, salt).hex() if salt and server_secret else None
    return NewToken(name, scope, token, secret)


def list_tokens(store: Store) -> list[dict[str, Any]]:
    with store.reader.connect() as conn:
        return stored_tokens.listed(conn)


def revoke_token(ledger: Ledger, name: str) -> None:
    def work(tx: Tx) -> None:
        if not stored_tokens.revoke(tx.conn, name, tx.now):
            revoked = stored_tokens.name_taken(tx.conn, name)
            raise Missing(
                f"no active token named {name!r}" + (": it is revoked already" if revoked else "")
            )
        tx.event("token_revoked", None, {"name": name})

    ledger.run("cli", work)


def record_use(used: dict[int, datetime]) -> Callable[[Tx], int]:
    """A unit that moves each token's ``last_used_at`` forward to when it was last seen (never
    back: several receivers may share the database). Not an event: when a token was last used
    is for finding unused tokens, not part of the ledger's history."""

    def work(tx: Tx) -> int:
        for token_id, at in used.items():
            stored_tokens.record_use(tx.conn, token_id, at)
        return len(used)

    return work


MISS_RELOAD = 0.25  # seconds between reloads caused by unknown tokens


class TokenCache:
    """The active tokens, reloaded at most every ``ttl`` seconds, so that checking a request
    costs no database round trip. A revocation takes effect within ``ttl``. A token is looked
    up by its hash, compared with each active hash by ``hmac.compare_digest``; one that
    matched is then known by itself until the next reload.

    When each token was last used is kept here too, and written now and then
    (:meth:`take_used` + :func:`record_use`) rather than by every request."""

    def __init__(
        self,
        store: Store,
        ttl: float = 2.0,
        on_signing: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.store = store
        self.ttl = ttl
        # Told the signing salts a reload finds for the first time (a token created while the
        # receiver runs), before any request can use that token.
        self.on_signing = on_signing
        self._salts: set[str] = set()
        # The active tokens' hashes, and the tokens presented since they were loaded that
        # matched one (by the token itself: a hash a request costs more than the rest of
        # the lookup). One pair, replaced whole by a reload: a token found among the hashes
        # before a reload is never remembered among those after it.
        self._tokens: tuple[list[tuple[str, Principal]], dict[str, Principal]] = ([], {})
        self._loaded_at = -1e9
        self._lock = threading.Lock()
        self._used: dict[int, float] = {}  # token id -> time.time() of its last request

    @property
    def stale(self) -> bool:
        return time.monotonic() - self._loaded_at > self.ttl

    @property
    def worth_a_reload(self) -> bool:
        """After a miss: a token created a moment ago is found at once, not after ``ttl``;
        unknown tokens sent in a loop reload at most every ``MISS_RELOAD`` seconds."""
        return time.monotonic() - self._loaded_at > MISS_RELOAD

    def reload(self) -> None:
        with self.store.reader.connect() as conn:
            rows = stored_tokens.active(conn)
        tokens = [(r.token_hash, Principal(r.id, r.name, r.scope, r.signing_secret)) for r in rows]
        salts = {r.signing_secret for r in rows if r.signing_secret} - self._salts
        if salts and self.on_signing is not None:
            self.on_signing(sorted(salts))
        self._salts |= salts
        with self._lock:
            self._tokens = (tokens, {})
            self._loaded_at = time.monotonic()

    def find(self, token: str) -> Principal | None:
        tokens, found_before = self._tokens
        found = found_before.get(token)
        if found is None:
            digest = token_digest(token)
            for stored, principal in tokens:
                if hmac.compare_digest(stored, digest):
                    found = principal
            if found is None:
                return None
            found_before[token] = found  # at most one entry an active token
        self._used[found.token_id] = time.time()
        return found

    def take_used(self) -> dict[int, datetime]:
        """The tokens used since the last call, with when each was last used."""
        used, self._used = self._used, {}
        return {token_id: datetime.fromtimestamp(t, UTC) for token_id, t in used.items()}
