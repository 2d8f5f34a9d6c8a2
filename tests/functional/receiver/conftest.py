"""An app on a fresh ledger (SQLite and PostgreSQL), a client, and one token per scope; the
same app with a checkpoint signing key.

The client is httpx over ``ASGITransport`` driven from a blocking portal, so tests stay plain
functions while the app runs its lifespan (the writer thread) in an event loop of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from flowledger.domain.checkpoints import Signer
from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.reads.tree_proofs import ledger_origin
from tests.support.receiver import SECRET, Api, api_config, make_token, running


@pytest.fixture
def api(ledger: Ledger) -> Iterator[Api]:
    tokens = {scope: make_token(ledger, scope, scope) for scope in ("write", "read", "operator")}
    app = create_app(ledger, config=api_config(), secret=SECRET, token_ttl=0.0)
    with running(app, ledger, tokens) as client:
        yield client


@pytest.fixture
def signer(ledger: Ledger) -> Signer:
    return Signer(ledger_origin(ledger.store), Ed25519PrivateKey.generate())


@pytest.fixture
def signing_api(ledger: Ledger, signer: Signer) -> Iterator[Api]:
    """An app that signs checkpoints, with a write and a read token."""
    tokens = {scope: make_token(ledger, scope, scope) for scope in ("write", "read")}
    app = create_app(
        ledger,
        config=api_config(),
        secret=SECRET,
        token_ttl=0.0,
        signer=signer,
    )
    with running(app, ledger, tokens) as client:
        yield client
