"""A bounded, deterministic property-based run over the receiver's OpenAPI with every
Schemathesis check: whatever it sends (valid or not, with an operator token, other methods
included), the answer is never a 5xx, its status, content type, headers and body are the
documented ones, a schema-valid request is accepted and a schema-violating one refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks

from flowledger.receiver.app import create_app
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger
from tests.support.builders import dispatch_body
from tests.support.receiver import SECRET, auth, make_token, receiver_config, server_thread


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    db = Path(tmp_path_factory.mktemp("schemathesis")) / "ledger.db"
    store, _ = init_ledger(str(db))
    ledger = Ledger(store)
    token = make_token(ledger, "fuzz", "operator")
    try:
        with server_thread(create_app(ledger, config=receiver_config(), secret=SECRET)) as url:
            httpx.post(
                f"{url}/v1/operations/op-1/dispatch", json=dispatch_body(), headers=auth(token)
            )
            yield url, token
    finally:
        store.dispose()


def _spec() -> dict[str, Any]:
    from flowledger.receiver.app import create_app as factory

    class _Unopened:  # the spec needs no database: build the app on a stand-in ledger
        store = type("S", (), {"dialect": "sqlite", "reader": None})()

    return factory(_Unopened()).openapi()  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def receiver_schema() -> Any:
    return schemathesis.openapi.from_dict(_spec())


# The cases are generated when the test runs, by the one worker that runs it: generated at
# collection, as a schema loaded at import has them, they took every worker about 5 s.
schema = schemathesis.pytest.from_fixture("receiver_schema")
load_all_checks()
ALL_CHECKS: list[Any] = list(CHECKS.get_all())


@schema.parametrize()
@settings(
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_receiver_does_what_its_openapi_says(case: Any, live: tuple[str, str]) -> None:
    url, token = live
    case.call_and_validate(base_url=url, headers=auth(token), checks=ALL_CHECKS, timeout=30)
