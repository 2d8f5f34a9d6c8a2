"""A bounded, deterministic property-based run over the receiver's OpenAPI: whatever
schemathesis sends (valid or not, with an operator token), the answer is never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from ledger.receiver import create_app
from ledger.storage.migrate import init_ledger
from ledger.writer.services import Ledger
from tests.support.builders import dispatch_body
from tests.support.receiver import SECRET, auth, make_token, server_thread


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    db = Path(tmp_path_factory.mktemp("schemathesis")) / "ledger.db"
    store, _ = init_ledger(str(db))
    ledger = Ledger(store)
    token = make_token(ledger, "fuzz", "operator")
    try:
        with server_thread(create_app(ledger, secret=SECRET)) as url:
            httpx.post(
                f"{url}/v1/operations/op-1/dispatch", json=dispatch_body(), headers=auth(token)
            )
            yield url, token
    finally:
        store.dispose()


def _spec() -> dict[str, Any]:
    from ledger.receiver.app import create_app as factory

    class _Unopened:  # the spec needs no database: build the app on a stand-in ledger
        store = type("S", (), {"dialect": "sqlite", "reader": None})()

    return factory(_Unopened()).openapi()  # type: ignore[arg-type]


schema = schemathesis.openapi.from_dict(_spec())


@schema.parametrize()
@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_no_input_makes_the_receiver_fail(case: Any, live: tuple[str, str]) -> None:
    url, token = live
    response = case.call(base_url=url, headers=auth(token), timeout=30)
    assert response.status_code < 500, (case.method, case.path, response.text)
