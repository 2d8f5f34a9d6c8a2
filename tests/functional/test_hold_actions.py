"""Every action on a hold, through each way in: the terminal UI (keys and dialogs), ``flowledger
hold`` and the API with an operator token. Each records the same events, refuses with the same
words, and the listings (``holds --json``, ``GET /v1/holds``) say what ``show --json`` says."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app as cli
from flowledger.receiver.app import create_app
from flowledger.services import actions
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, open_store
from flowledger.storage.reads import hold_queue as holds
from flowledger.storage.reads import records as queries
from flowledger.tui import make_app
from flowledger.tui.screens.actions import KEYS
from tests.functional.conftest import copy_demo
from tests.support.builders import SHIFT_END, FakeClock
from tests.support.receiver import SECRET, make_token, receiver_config, running
from tests.support.tui import select_hold, settle, start_action

runner = CliRunner()
FAR = "2030-01-02T09:00:00+00:00"  # past every demo deadline, whichever way it is counted
NOTE = "seen in the target's own log"


@dataclass(frozen=True)
class Case:
    action: str
    reason: str  # the demo's open hold it is taken on (the first of that reason)
    values: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("confirm", "unknown_outcome", {"receipt": "bank-ref-77"}),
    Case("release", "unknown_outcome"),
    Case("cancel", "stale_prepared"),
    Case("dismiss", "input_mismatch"),
    Case("reapprove", "approval_expired", {"expires_at": FAR}),
    Case("allow-attempt", "max_attempts"),
    Case("assign", "execution_failed", {"owner": "erin"}),
    Case("extend", "unknown_outcome", {"deadline": FAR}),
    Case("note", "source_stale", {"next_action": "ask the n8n admin"}),
]


def _hold_of(store: Store, reason: str) -> int:
    rows = holds.hold_queue(store, SHIFT_END, flt=holds.HoldFilter(reason=reason))
    assert rows, f"no open {reason} hold in the demo"
    return int(rows[0]["id"])


def _events_after(store: Store, seq: int) -> list[tuple[Any, ...]]:
    """What the events say, without when: each way in reads its own clock."""
    return [
        (e["kind"], e["actor"], e["operation_id"], e["hold_id"], e["data"])
        for e in queries.iter_events(store)
        if e["seq"] > seq
    ]


async def _by_tui(ledger: Ledger, hold_id: int, case: Case, tmp: Path) -> str:
    app = make_app(
        ledger, operator="dave", clock=ledger.clock, report_dir=tmp, refresh_seconds=None
    )
    async with app.run_test(size=(160, 45)) as pilot:
        await start_action(pilot, hold_id, KEYS[case.action][0], note=NOTE, **case.values)
        await pilot.press("y")
        await settle(pilot)
        return app.last_message


def tui(db: str, hold_id: int, case: Case, tmp: Path) -> str:
    store = open_store(db)
    try:
        return asyncio.run(_by_tui(Ledger(store, clock=FakeClock(SHIFT_END)), hold_id, case, tmp))
    finally:
        store.dispose()


def _options(values: dict[str, str]) -> list[str]:
    names = {"expires_at": "--expires", "next_action": "--next-action"}
    return [arg for k, v in values.items() for arg in (names.get(k, f"--{k}"), v)]


def by_cli(db: str, hold_id: int, case: Case, tmp: Path) -> str:
    args = ["hold", str(hold_id), case.action, "--db", db, "--operator", "dave", "--yes"]
    result = runner.invoke(cli, [*args, "--note", NOTE, *_options(case.values)])
    return result.output


def by_api(db: str, hold_id: int, case: Case, tmp: Path) -> str:
    store = open_store(db)
    try:
        ledger = Ledger(store, clock=FakeClock(SHIFT_END))
        tokens = {"dave": make_token(ledger, "dave", "operator")}
        seq = queries.status(store, SHIFT_END).events
        app = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
        with running(app, ledger, tokens) as api:
            answer = api.post(
                f"/v1/holds/{hold_id}/{case.action}",
                {"note": NOTE, **case.values},
                token="dave",
            )
        # The token's creation is the API's own event, not the action's.
        assert [e["kind"] for e in queries.iter_events(store) if e["seq"] <= seq][-1] == (
            "token_created"
        )
        return answer.text
    finally:
        store.dispose()


WAYS: dict[str, Callable[[str, int, Case, Path], str]] = {
    "tui": tui,
    "cli": by_cli,
    "api": by_api,
}


def _run(way: str, template: Path, tmp: Path, case: Case) -> tuple[list[Any], str, int]:
    db = copy_demo(template, tmp / f"{way}.db")
    store = open_store(db)
    try:
        hold_id = _hold_of(store, case.reason)
        seq = queries.status(store, SHIFT_END).events
        if way == "api":
            seq += 1  # the operator token's creation
        said = WAYS[way](db, hold_id, case, tmp)
        return _events_after(store, seq), said, hold_id
    finally:
        store.dispose()


@pytest.mark.parametrize("case", CASES, ids=[c.action for c in CASES])
def test_every_way_in_records_the_same_events(
    case: Case, demo_template: Path, tmp_path: Path
) -> None:
    recorded = {way: _run(way, demo_template, tmp_path, case) for way in WAYS}
    events, said, hold_id = recorded["tui"]
    assert events, said
    assert events[0][1] == "operator:dave"
    assert recorded["cli"][0] == events, recorded["cli"][1]
    assert recorded["api"][0] == events, recorded["api"][1]
    deadline = case.values.get("deadline")
    given = actions.Values(
        note=NOTE,
        owner=case.values.get("owner"),
        deadline=datetime.fromisoformat(deadline) if deadline else None,
    )
    done = f"Hold {hold_id} {actions.done(case.action, given, 'dave')}."
    assert said == done and recorded["cli"][1].strip().endswith(done)
    assert json.loads(recorded["api"][1])["id"] == hold_id


async def _refused_by_tui(ledger: Ledger, hold_id: int, key: str, tmp: Path) -> str:
    app = make_app(
        ledger, operator="dave", clock=ledger.clock, report_dir=tmp, refresh_seconds=None
    )
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(pilot)
        await select_hold(pilot, hold_id)
        await pilot.press(key)
        await settle(pilot)
        return app.last_message


@pytest.mark.parametrize(
    ("action", "reason"),
    [("dismiss", "unknown_outcome"), ("allow-attempt", "approval_expired")],
)
def test_every_way_in_refuses_with_the_same_words(
    demo_store: Store, demo_ledger: Ledger, tmp_path: Path, action: str, reason: str
) -> None:
    hold_id = _hold_of(demo_store, reason)
    line = actions.refused(action, holds.hold(demo_store, hold_id) or {})
    assert line is not None
    said = asyncio.run(_refused_by_tui(demo_ledger, hold_id, KEYS[action][0], tmp_path))
    db = str(demo_store.url.database)
    by_cli = runner.invoke(cli, ["hold", str(hold_id), action, "--db", db, "--note", NOTE])
    tokens = {"dave": make_token(demo_ledger, "dave", "operator")}
    with running(
        create_app(demo_ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0),
        demo_ledger,
        tokens,
    ) as api:
        by_api = api.post(f"/v1/holds/{hold_id}/{action}", {"note": NOTE}, token="dave")
    assert said == line
    assert (by_cli.exit_code, by_cli.output) == (2, f"flowledger: {line}\n")
    assert by_api.status_code == 409
    assert line.endswith(f": {by_api.json()['error']['message']}.")
    assert holds.hold(demo_store, hold_id)["resolved_at"] is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("content_type", "status"),
    [
        (None, 415),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("application/xml", 415),
        ("application/json", 200),
        ("Application/JSON; charset=utf-8", 200),
        ("application/merge-patch+json", 200),
    ],
)
def test_an_action_sent_as_anything_but_json_is_415_and_does_nothing(
    demo_store: Store, demo_ledger: Ledger, content_type: str | None, status: int
) -> None:
    """As the workflow calls answer it (and docs/api.md says): the body is JSON or the action
    is refused, after the token and before the body is read."""
    hold_id = _hold_of(demo_store, "source_stale")
    tokens = {"dave": make_token(demo_ledger, "dave", "operator")}
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = json.dumps({"note": NOTE}).encode()
    before = queries.status(demo_store, SHIFT_END).events
    with running(
        create_app(demo_ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0),
        demo_ledger,
        tokens,
    ) as api:
        path = f"/v1/holds/{hold_id}/note"
        anonymous = api.post(path, token=None, content=body, headers=headers)
        answer = api.post(path, token="dave", content=body, headers=headers)
    assert anonymous.status_code == 401  # the token first, whatever the body
    assert answer.status_code == status, answer.text
    written = queries.status(demo_store, SHIFT_END).events - before
    if status == 415:
        assert answer.json()["error"] == {
            "code": "unsupported_media_type",
            "message": "send the body with Content-Type: application/json",
            "field": None,
        }
        assert written == 0
    else:
        assert answer.json()["id"] == hold_id and written == 1  # the note
