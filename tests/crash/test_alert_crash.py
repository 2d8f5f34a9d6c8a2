"""An alert sent but not yet marked delivered when the process dies is sent again, same id."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.domain import FailOutcome
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Outbox, table
from tests.support.builders import req
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for, kill_at
from tests.support.webhook import AlertReceiver

OUTBOX = table(Outbox)
pytestmark = pytest.mark.crash


def test_alert_sent_before_a_crash_is_sent_again_with_the_same_id(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    receiver = AlertReceiver()
    try:
        config = tmp_path / "flowledger.toml"
        config.write_text(f'[alerts]\nurls = ["{receiver.url}"]\n')
        ledger = Ledger(store, alert_urls=[receiver.url])
        ledger.dispatch("op-1", req()).run("wf")
        ledger.fail("op-1", FailOutcome.UNKNOWN, "timeout").run("wf")
        with store.reader.connect() as conn:
            (delivery_id,) = conn.execute(sa.select(OUTBOX.c.delivery_id)).scalars().all()

        kill_at("after_alert_sent", ["alerts", "--once"], env_for(db_url, config), tmp_path)
        assert receiver.ids == [delivery_id]
        with store.reader.connect() as conn:
            assert conn.execute(sa.select(OUTBOX.c.delivered_at)).scalar_one() is None

        again = subprocess.run(
            [FLOWLEDGER, "alerts", "--once"],
            env=env_for(db_url, config),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert again.returncode == 0, again.stderr
        assert "1 delivered" in again.stdout
        assert receiver.ids == [delivery_id, delivery_id]  # same id: the receiver drops it
        with store.reader.connect() as conn:
            assert conn.execute(sa.select(OUTBOX.c.delivered_at)).scalar_one() is not None
    finally:
        receiver.close()
