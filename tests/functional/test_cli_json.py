"""``--json`` of ``status``, ``verify``, ``sources`` and ``token list`` as a script reads it:
it parses, it holds what the ledger holds, and it calls things what ``show --json`` and
``holds --json`` call them."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.receiver.api.tokens import list_tokens
from flowledger.storage.engine import open_store
from flowledger.sync import connect
from tests.functional.conftest import copy_demo
from tests.support.cli import N8N_SOURCE, cli_workdir
from tests.support.fakes.n8n import KEY, FakeN8n
from tests.support.times import odd_times, times_in

runner = CliRunner()


@pytest.fixture
def db(demo_template: Path, tmp_path: Path) -> str:
    return copy_demo(demo_template, tmp_path / "demo.db")


def answer(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def events(db: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["export", "--db", db])
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_status_json_counts_what_show_and_holds_json_say(db: str) -> None:
    status = answer("status", "--db", db, "--json")
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT operation_id FROM operations")]
    states = Counter(answer("show", op, "--db", db, "--json")["operation"]["state"] for op in ids)
    assert status["operations"]["total"] == len(ids)
    assert {k: v for k, v in status["operations"]["by_state"].items() if v} == dict(states)
    assert set(status["operations"]["by_state"]) == {
        "prepared",
        "dispatching",
        "confirmed",
        "failed",
        "cancelled",
    }
    held = answer("holds", "--db", db, "--json")
    assert status["open_holds"]["by_reason"] == dict(Counter(h["reason"] for h in held))
    assert status["open_holds"]["total"] == len(held)
    assert status["open_holds"]["blocking"] == sum(h["blocking"] for h in held)
    assert status["open_holds"]["overdue"] == len(
        answer("holds", "--db", db, "--json", "--overdue")
    )
    log = events(db)
    assert (status["events"], status["head_hash"]) == (log[-1]["seq"], log[-1]["hash"])
    assert status["ledger_id"] == "00000000-0000-4000-8000-00000000d3a0"
    assert datetime.fromisoformat(status["at"]).tzinfo is not None


def test_verify_json_is_one_result_object_and_keeps_the_exit_codes(db: str) -> None:
    head = events(db)[-1]
    ok = answer("verify", "--db", db, "--json", "--deep", "--expect-head", head["hash"][:20])
    assert ok["ok"] is True and ok["anchors"] is None
    assert ok["chain"] == {
        "ok": True,
        "checked": head["seq"],
        "head_seq": head["seq"],
        "head_hash": head["hash"],
        "bad_seq": None,
        "tree_ok": True,
        "problem": None,
        "expected_head": {"seq": head["seq"], "appended_since": 0},
    }
    assert ok["deep"]["ok"] is True and ok["deep"]["findings"] == []
    assert ok["deep"]["events"] == head["seq"]

    with sqlite3.connect(db) as conn:
        (op,) = conn.execute(
            "SELECT operation_id FROM operations WHERE state = 'confirmed' LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE operations SET state = 'cancelled' WHERE operation_id = ?", (op,))
    bad = answer("verify", "--db", db, "--json", "--deep", code=1)
    assert bad["ok"] is False and bad["chain"]["ok"] is True
    assert bad["deep"]["differences"] == 1
    assert bad["deep"]["findings"] == [
        {
            "what": f"operation {op}",
            "column": "state",
            "stored": "cancelled",
            "expected": "confirmed",
            "note": None,
        }
    ]
    assert answer("verify", "--db", db, "--json")["ok"] is True  # the chain alone is whole


def test_sources_json_holds_each_source_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeN8n()
    db = cli_workdir(
        tmp_path,
        monkeypatch,
        N8N_SOURCE.replace("prod-n8n", "fresh") + N8N_SOURCE,
        TEST_N8N_API_KEY=KEY,
    )
    monkeypatch.setattr(connect, "make_client", lambda cfg: fake.client())
    fake.add(3)
    assert runner.invoke(app, ["sync", "--once", "--source", "prod-n8n"]).exit_code == 0
    listed = answer("sources", "--json")
    assert [s["name"] for s in listed] == ["fresh", "prod-n8n"]
    fresh, synced = listed
    assert fresh == {
        "name": "fresh",
        "kind": "n8n",
        "status": "new",
        "configured": True,
        "last_sync_at": None,
        "last_success_at": None,
        "lag_seconds": None,
        "last_error": None,
        "pinned_after_holds": [],
        "acting_waiting": [],
    }
    with sqlite3.connect(db) as conn:
        stored = conn.execute(
            "SELECT status, last_sync_at, last_success_at FROM sources WHERE name = 'prod-n8n'"
        ).fetchone()
    assert synced["status"] == stored[0] == "ok" and synced["configured"] is True
    for key, value in zip(("last_sync_at", "last_success_at"), stored[1:], strict=True):
        assert datetime.fromisoformat(synced[key]).replace(tzinfo=None) == datetime.fromisoformat(
            value
        ).replace(tzinfo=None)
    assert isinstance(synced["lag_seconds"], int) and synced["lag_seconds"] >= 0


def test_token_list_json_names_each_token_and_never_shows_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = cli_workdir(tmp_path, monkeypatch, "")
    made = [
        runner.invoke(app, ["token", "create", "--name", name, "--scope", scope]).stdout
        for name, scope in (("n8n-prod", "write"), ("grafana", "read"))
    ]
    assert runner.invoke(app, ["token", "revoke", "grafana"]).exit_code == 0
    result = runner.invoke(app, ["token", "list", "--json"])
    assert result.exit_code == 0
    assert all(text.splitlines()[1] not in result.stdout for text in made)
    listed = json.loads(result.stdout)
    assert [(t["name"], t["scope"], t["state"]) for t in listed] == [
        ("grafana", "read", "revoked"),
        ("n8n-prod", "write", "active"),
    ]
    store = open_store(str(db))
    try:
        stored = list_tokens(store)
    finally:
        store.dispose()
    for shown, row in zip(listed, stored, strict=True):
        assert set(shown) == {*row, "state"}
        for key, value in row.items():
            expected = value.isoformat() if isinstance(value, datetime) else value
            assert shown[key] == expected


def test_every_time_in_json_output_is_written_one_way(db: str) -> None:
    shown = answer("show", "demo:payout:P-2202:transfer", "--db", db, "--json")
    documents = [
        shown,
        answer("holds", "--db", db, "--json"),
        answer("status", "--db", db, "--json"),
        answer("token", "list", "--db", db, "--json"),
    ]
    for document in documents:
        assert odd_times(document) == []
    assert len(list(times_in(shown))) > 10
    assert shown["operation"]["deadline"] == shown["events"][0]["data"]["deadline"]
