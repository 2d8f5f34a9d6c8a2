"""A head queued to the alert URLs but not yet in the anchor file when the process dies is
published again at the next run: into the file, and not twice to the URLs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store
from flowledger.storage.models import Outbox, table
from tests.support.builders import req
from tests.support.processes import FLOWLEDGER, TIMEOUT, env_for, kill_at

OUTBOX = table(Outbox)
pytestmark = pytest.mark.crash


def test_a_head_queued_before_a_crash_reaches_the_file_once_and_the_urls_once(
    store: Store, db_url: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    anchors = tmp_path_factory.mktemp("kept") / "anchors.jsonl"  # not beside the database
    config = tmp_path / "flowledger.toml"
    config.write_text(
        f'[alerts]\nurls = ["http://127.0.0.1:9/hook"]\n\n[anchors]\nfile = "{anchors}"\n'
        "alerts = true\n"
    )
    Ledger(store).dispatch("op-1", req()).run("wf")

    kill_at("after_anchor_queued", ["anchor", "--once"], env_for(db_url, config), tmp_path)
    assert not anchors.exists()

    again = subprocess.run(
        [FLOWLEDGER, "anchor", "--once"],
        env=env_for(db_url, config),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("published head seq 1 hash ")
    assert [json.loads(line)["seq"] for line in anchors.read_text().splitlines()] == [1]
    with store.reader.connect() as conn:
        queued = conn.execute(sa.select(OUTBOX.c.kind, OUTBOX.c.delivery_id)).all()
    assert [kind for kind, _ in queued] == ["chain_head"]  # queued once, not twice
    check = subprocess.run(
        [FLOWLEDGER, "verify", "--anchors", str(anchors)],
        env=env_for(db_url, config),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert check.returncode == 0 and "anchors ok: 1 published head found" in check.stdout
