"""``hold ID release --retry`` (the API's is in ``receiver/test_release_retry.py``):
offered only for an execution known to have failed, n8n called after the release is
recorded, its refusal said in one line with the release standing; ``sources`` and ``sources
check`` say what is pinned and which scopes are missing; ``delete-pinned`` asks first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from flowledger.domain import FailOutcome
from flowledger.scheduled.acting import Acting
from flowledger.services.ledger import Ledger
from flowledger.storage.acting_models import RetryRequest
from flowledger.storage.engine import Store, open_store
from flowledger.storage.models import Execution, table
from tests.support.builders import execution_row, req
from tests.support.cli import cli, cli_workdir
from tests.support.fakes.n8n_actions import KEY, FakeN8n
from tests.support.fakes.n8n_setup import serving

RETRIES = table(RetryRequest)
OP = "invoice:INV-9:send"


@pytest.fixture
def n8n() -> Iterator[tuple[FakeN8n, str]]:
    fake = FakeN8n()
    fake.add("21", "crashed")
    fake.add("22", "success")
    with serving(fake) as url:
        yield fake, url


@pytest.fixture
def ledger_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n8n: tuple[FakeN8n, str]
) -> Iterator[Store]:
    config = (
        f'[[sources]]\nname = "prod-n8n"\nkind = "n8n"\nbase_url = "{n8n[1]}"\n'
        'api_key_env = "TEST_N8N_API_KEY"\nconnect_timeout = "2s"\ntimeout = "5s"\n'
    )
    db = cli_workdir(tmp_path, monkeypatch, config, TEST_N8N_API_KEY=KEY)
    store = open_store(str(db))
    yield store
    store.dispose()


def held(store: Store, execution_id: str, *, failed: bool) -> int:
    """An operation dispatched by ``execution_id`` and held: execution_failed, or
    unknown_outcome."""
    ledger = Ledger(store, pin_sources=["prod-n8n"])
    op = f"{OP}:{execution_id}"
    ledger.dispatch(op, req(execution_id)).run("wf")
    if failed:
        ((_, hold_id),) = ledger.execution_failed(execution_id, "crashed").run("hook")
        assert hold_id is not None
        return hold_id
    answer = ledger.fail(op, FailOutcome.UNKNOWN, "timeout").run("wf")
    return answer.hold_ids[0]


def retries(store: Store) -> list[Any]:
    with store.reader.connect() as conn:
        return conn.execute(sa.select(RETRIES)).all()


def test_release_retry_calls_n8n_after_the_release_and_says_the_new_execution(
    ledger_db: Store, n8n: tuple[FakeN8n, str]
) -> None:
    hold_id = held(ledger_db, "21", failed=True)
    code, out, err = cli("hold", str(hold_id), "release", "--retry", "--yes", "--note", "none")
    assert code == 0, err
    assert "Then n8n is asked to run execution 21 again" in err  # the confirmation said so
    assert out.splitlines() == [
        f"Hold {hold_id} released for retry by {out.split(' by ')[1].split('.')[0]}.",
        "Retry asked: n8n is running execution 21 again as execution 23.",
    ]
    (row,) = retries(ledger_db)
    assert (row.outcome, row.new_execution_id) == ("retried", "23")
    code, shown, _ = cli("show", f"{OP}:21")
    assert code == 0 and "-> execution 23" in shown
    # The call was the operator's, not the scheduler's.
    (retried,) = [line for line in shown.splitlines() if "execution_retried" in line]
    assert "operator:" in retried and "scheduler" not in retried


def test_release_retry_refused_by_n8n_leaves_the_release_and_says_why_in_one_line(
    ledger_db: Store, n8n: tuple[FakeN8n, str]
) -> None:
    hold_id = held(ledger_db, "21", failed=True)
    n8n[0].answers["POST /executions/21/retry"].append(
        (409, {"message": "The execution succeeded, so it cannot be retried."})
    )
    code, out, err = cli("hold", str(hold_id), "release", "--retry", "--yes", "--note", "none",
                         "--operator", "ana")  # fmt: skip
    assert code == 0, err
    code, shown, _ = cli("show", f"{OP}:21")
    (refused,) = [line for line in shown.splitlines() if "retry_refused" in line]
    assert "operator:ana" in refused
    assert out.splitlines()[-1] == (
        "The release stands; n8n refused the retry: n8n will not retry execution 21 (409): "
        "The execution succeeded, so it cannot be retried."
    )
    code, listed, _ = cli("hold", str(hold_id), "release", "--note", "again", "--yes")
    assert code != 0 and "already resolved" in listed + _


def test_release_retry_with_n8n_down_stands_and_leaves_the_retry_to_the_scheduler(
    ledger_db: Store, n8n: tuple[FakeN8n, str], tmp_path: Path
) -> None:
    hold_id = held(ledger_db, "21", failed=True)
    toml = (tmp_path / "flowledger.toml").read_text()
    (tmp_path / "flowledger.toml").write_text(toml.replace(n8n[1], "http://127.0.0.1:9"))
    code, out, err = cli("hold", str(hold_id), "release", "--retry", "--yes", "--note", "none")
    assert code == 0, err
    assert out.splitlines()[-1].startswith(
        "The release stands; the retry will be tried again: cannot reach n8n at "
    )
    (row,) = retries(ledger_db)
    assert row.done_at is None and row.called_at is None


def test_retry_is_not_offered_for_an_execution_not_known_to_have_failed(
    ledger_db: Store,
) -> None:
    hold_id = held(ledger_db, "22", failed=False)  # unknown_outcome; no copy of 22
    code, out, err = cli("hold", str(hold_id), "release", "--retry", "--yes", "--note", "n")
    assert code != 0
    assert (out + err).strip().endswith(
        "n8n retries only those. Nothing changed."
    ) and "--retry is not possible" in out + err
    assert retries(ledger_db) == []
    code, out, err = cli("hold", str(hold_id), "cancel", "--retry", "--yes", "--note", "n")
    assert code != 0 and "--retry is not an option of cancel" in out + err


def test_sources_lists_pinned_executions_of_resolved_holds_and_delete_asks_first(
    ledger_db: Store, n8n: tuple[FakeN8n, str]
) -> None:
    from flowledger.cli.common import file_settings

    hold_id = held(ledger_db, "21", failed=True)
    assert Acting(Ledger(ledger_db), file_settings().sources).run().pinned == 1
    cli("hold", str(hold_id), "cancel", "--yes", "--note", "done")
    code, listed, _ = cli("sources")
    assert "1 execution pinned in n8n for holds now resolved" in listed
    code, as_json, _ = cli("sources", "--json")
    assert json.loads(as_json)[0]["pinned_after_holds"][0]["execution_id"] == "21"
    code, out, err = cli("sources", "delete-pinned", "prod-n8n", "--yes")
    assert code != 0 and out.splitlines() == [
        "execution 21: not deleted: the ledger has no copy of it yet (flowledger sync --once "
        "copies it)"
    ]
    with ledger_db.engine.begin() as conn:  # as the sync copies it
        conn.execute(table(Execution).insert(), [execution_row("21", "crashed")])
    code, out, err = cli("sources", "delete-pinned", "prod-n8n")  # no terminal, no --yes
    assert code != 0 and "nothing deleted" in out + err and "21" in n8n[0].executions
    code, out, err = cli("sources", "delete-pinned", "prod-n8n", "--execution", "99", "--yes")
    assert code != 0 and "not pinned for resolved holds of prod-n8n: 99" in out + err
    code, out, err = cli("sources", "delete-pinned", "prod-n8n", "--yes")
    assert code == 0 and out.splitlines()[-1] == "execution 21: deleted"
    assert "21" not in n8n[0].executions
    code, listed, _ = cli("sources")
    assert "pinned in n8n" not in listed


def test_sources_check_names_each_missing_scope(ledger_db: Store, n8n: tuple[FakeN8n, str]) -> None:
    n8n[0].scopes = {"executionTags:update"}
    n8n[0].answers["GET /executions"].append((200, {"data": [], "nextCursor": None}))
    code, out, err = cli("sources", "check", "prod-n8n")
    assert code == 0, err
    assert out.splitlines()[1:] == [
        "prod-n8n: the API key lacks the execution:retry scope, needed for hold ID release "
        "--retry: add it to the key in n8n (Settings → n8n API)",
        "prod-n8n: the API key lacks the execution:delete scope, needed for sources "
        "delete-pinned: add it to the key in n8n (Settings → n8n API)",
    ]
    assert KEY not in out + err


def test_a_pin_refused_for_a_scope_is_shown_by_act_sources_and_doctor(
    ledger_db: Store, n8n: tuple[FakeN8n, str]
) -> None:
    from flowledger.plumbing.clock import utcnow
    from flowledger.storage.acting_models import EvidencePin

    n8n[0].scopes = {"execution:retry", "execution:delete"}
    held(ledger_db, "21", failed=True)
    said = "the n8n API key lacks the executionTags:update scope (403)"
    code, out, err = cli("act", "--once")
    assert code == 0, err
    first, waits = out.splitlines()
    assert first == "pinned 0 executions (1 waiting), retried 0 executions, 0 refused (0 waiting)"
    assert waits.split()[:3] == ["prod-n8n", "1", "pin"] and said in waits
    code, out, err = cli("act", "--once")  # waiting out its backoff: still counted
    assert out.splitlines()[0].startswith("pinned 0 executions (1 waiting)")
    code, listed, _ = cli("sources")
    assert "pins and retries waiting to be made in n8n" in listed and said in listed
    code, as_json, _ = cli("sources", "--json")
    (waiting,) = json.loads(as_json)[0]["acting_waiting"]
    assert (waiting["what"], waiting["count"]) == ("pin", 1) and said in waiting["last_error"]
    code, out, _ = cli("doctor")
    assert "1 pin of prod-n8n waiting" in out and "WARNING" not in out
    with ledger_db.engine.begin() as conn:  # queued two hours ago
        pins = table(EvidencePin)
        conn.execute(pins.update().values(created_at=utcnow() - timedelta(hours=2)))
    code, out, _ = cli("doctor")
    (line,) = [x for x in out.splitlines() if x.startswith("pins, retries:")]
    assert "WARNING: 1 pin of prod-n8n waiting since" in line and said in line


@pytest.mark.parametrize(("failed", "reason", "other"), [
    (True, "execution_failed", "unknown_outcome"), (False, "unknown_outcome", "execution_failed"),
])  # fmt: skip
def test_the_release_confirmation_names_the_reason_of_the_hold_released(
    ledger_db: Store, failed: bool, reason: str, other: str
) -> None:
    hold_id = held(ledger_db, "21", failed=failed)
    code, _, err = cli("hold", str(hold_id), "release", "--yes", "--note", "none")
    assert code == 0, err
    said = " ".join(err.split())  # as wrapped for the terminal
    assert f"goes back to PREPARED and this {reason} hold and any open {other} hold" in said
