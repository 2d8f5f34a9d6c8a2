"""A retry asked with a release is made once in n8n, whichever point the process making it
dies at: after the call is marked (before n8n hears of it), or after n8n made the retry and
before the ledger recorded it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.acting_models import RetryRequest
from flowledger.storage.engine import Store
from flowledger.storage.models import table
from tests.support.builders import req
from tests.support.fakes.n8n_actions import KEY, FakeN8n
from tests.support.fakes.n8n_setup import serving
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for, kill_at

RETRIES = table(RetryRequest)
pytestmark = pytest.mark.crash
OP = "invoice:INV-7:send"


@pytest.fixture
def n8n() -> FakeN8n:
    fake = FakeN8n()
    fake.add("40", "crashed")
    return fake


def retry_row(store: Store) -> sa.Row[tuple[object, ...]]:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(RETRIES)).one()


@pytest.mark.parametrize(
    ("point", "made_before_restart"),
    [("after_retry_claimed", 0), ("after_retry_called", 1)],
)
def test_a_retry_is_made_once_whatever_point_the_process_dies_at(
    store: Store, db_url: str, tmp_path: Path, n8n: FakeN8n, point: str,
    made_before_restart: int,
) -> None:  # fmt: skip
    with serving(n8n) as url:
        retried_once(store, db_url, tmp_path, n8n, url, point, made_before_restart)


def retried_once(
    store: Store, db_url: str, tmp_path: Path, n8n: FakeN8n, url: str, point: str,
    made_before_restart: int,
) -> None:  # fmt: skip
    config = tmp_path / "flowledger.toml"
    config.write_text(
        f'[[sources]]\nname = "prod-n8n"\nkind = "n8n"\nbase_url = "{url}"\n'
        'api_key_env = "N8N_KEY"\n'
    )
    ledger = Ledger(store)
    ledger.dispatch(OP, req("40")).run("wf")
    ((_op, hold_id),) = ledger.execution_failed("40", "n8n crashed").run("hook")
    assert hold_id is not None
    ledger.resolve(hold_id, "release", note="target has nothing", operator="ana",
                   retry=True).run()  # fmt: skip
    env = env_for(db_url, config, N8N_KEY=KEY)

    kill_at(point, ["act", "--once"], env, tmp_path)
    assert n8n.posts("/retry") == made_before_restart
    row = retry_row(store)
    assert row.called_at is not None and row.done_at is None

    # The mark keeps other drainers off until its call's timeouts have passed: they have.
    with store.engine.begin() as conn:
        conn.execute(RETRIES.update().values(next_attempt_at=row.asked_at))
    again = subprocess.run(
        [FLOWLEDGER, "act", "--once"], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert again.returncode == 0, again.stderr
    assert "retried 1 execution" in again.stdout
    assert n8n.posts("/retry") == 1  # never two
    retried = [e for e in n8n.executions.values() if e.get("retryOf") == "40"]
    assert len(retried) == 1
    row = retry_row(store)
    assert (row.outcome, row.new_execution_id) == ("retried", retried[0]["id"])
