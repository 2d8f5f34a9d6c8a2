"""`flowledger sweep/alerts/housekeeping --once`, and `run` refusing bad settings."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli.common import app
from flowledger.programs import runner as runner_module
from flowledger.scheduled.housekeeping import expire_idempotency_keys
from flowledger.services.ledger import Ledger, utcnow
from flowledger.storage.engine import Store
from flowledger.storage.models import IdempotencyKey, table
from tests.support.builders import FakeClock, req

KEYS = table(IdempotencyKey)
runner = CliRunner()


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "flowledger.toml"
    path.write_text("")
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(path))
    return path


def test_sweep_once_opens_due_holds_and_reports_them(
    store: Store, db_url: str, config: Path
) -> None:
    Ledger(store).dispatch("op-1", req(deadline=utcnow() - timedelta(seconds=1))).run("wf")
    result = runner.invoke(app, ["sweep", "--once", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "sweep opened 1 hold\n" in result.output and "unknown_outcome" in result.output
    again = runner.invoke(app, ["sweep", "--once", "--db", db_url])
    assert "sweep opened 0 holds" in again.output


def test_the_sweeps_log_counts_one_hold_in_the_singular(
    store: Store, config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from flowledger.config import load_config
    from flowledger.scheduled.sweep import Sweep

    cfg = load_config()
    ledger = Ledger(store)
    ledger.dispatch("op-1", req(deadline=utcnow() - timedelta(seconds=1))).run("wf")
    with caplog.at_level("INFO", logger="flowledger.scheduled.sweep"):
        Sweep(ledger, cfg.sweep, cfg.sources).run()
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["sweep opened 1 hold"]


def test_jobs_without_once_point_at_run(store: Store, db_url: str, config: Path) -> None:
    for job in ("sweep", "alerts", "housekeeping"):
        result = runner.invoke(app, [job, "--db", db_url])
        assert result.exit_code == 2
        assert "--once" in result.output and "flowledger run" in result.output


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[alerts]\nurls = ["file:///etc/passwd"]\n', "alerts.urls"),
        ('[alerts]\nurls = ["http://a/", "http://a/"]\n', "distinct"),
        ('[scheduler]\nlease = "-1s"\n', "scheduler.lease"),
        ('[sweep]\ninterval = "soon"\n', "sweep.interval"),
        ("[scheduler]\nlease = inf\n", "scheduler.lease"),
        ('[sweep]\ninterval = "99999999999d"\n', "sweep.interval"),
        ("[sweep]\ndispatch_deadline = 1e300\n", "sweep.dispatch_deadline"),
    ],
)
def test_bad_scheduling_settings_are_one_line_errors(
    store: Store, db_url: str, config: Path, toml: str, message: str
) -> None:
    config.write_text(toml)
    result = runner.invoke(app, ["run", "--db", db_url, "--port", "0"])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert result.output.count("\n") == 1


@pytest.mark.parametrize(
    ("toml", "env", "said"),
    [
        (
            '[sweep]\ninterval = "soon"\n',
            {},
            "sweep.interval: 'soon' is not a duration (use e.g. '90s', '15m', '24h', '2d')",
        ),
        (
            '[scheduler]\nlease = "0s"\n',
            {},
            "scheduler.lease: a duration must be at least 1 microsecond and at most 36500d",
        ),
        (
            "",
            {"FLOWLEDGER_DISPATCH_DEADLINE_SECONDS": "soon"},
            "bad setting FLOWLEDGER_DISPATCH_DEADLINE_SECONDS: must be a whole number",
        ),
        (
            "",
            {"FLOWLEDGER_DISPATCH_DEADLINE_SECONDS": "0"},
            "bad setting FLOWLEDGER_DISPATCH_DEADLINE_SECONDS: must be at least 1",
        ),
    ],
)
def test_a_bad_duration_is_said_in_the_ledgers_words_alone(
    store: Store,
    db_url: str,
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
    toml: str,
    env: dict[str, str],
    said: str,
) -> None:
    config.write_text(toml)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["sweep", "--once", "--db", db_url])
    assert result.exit_code == 2
    assert said in result.output
    assert "Value error" not in result.output and "Input should" not in result.output


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_run_refuses_a_port_out_of_range_before_starting(
    store: Store, db_url: str, config: Path, monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    started: list[int] = []
    monkeypatch.setattr(runner_module, "run", lambda *a, **kw: started.append(kw["port"]))
    result = runner.invoke(app, ["run", "--db", db_url, "--port", port])
    assert result.exit_code == 2 and "Invalid value for '--port'" in result.output
    assert started == []


def test_housekeeping_deletes_only_expired_idempotency_keys(store: Store, clock: FakeClock) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            KEYS.insert(),
            [
                {
                    "token_id": 1,
                    "key": f"k{n}",
                    "request_hash": "sha256:x",
                    "created_at": clock.now,
                    "expires_at": clock.now + timedelta(hours=n),
                }
                for n in range(5)
            ],
        )
    clock.advance(hours=2)
    assert expire_idempotency_keys(store, clock, batch=2) == 3
    with store.reader.connect() as conn:
        left = conn.execute(sa.select(KEYS.c.key).order_by(KEYS.c.key)).scalars().all()
    assert left == ["k3", "k4"]
