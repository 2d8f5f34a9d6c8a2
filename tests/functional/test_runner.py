"""`flowledger run`'s pieces: the jobs it schedules, and the scheduler riding the app lifespan."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI

from flowledger.config import FileConfig
from flowledger.programs.runner import Runner, attach
from flowledger.scheduled.scheduler import Job, Scheduler
from flowledger.services.ledger import Ledger


def test_the_runner_schedules_sweep_alerts_and_housekeeping_under_a_lease(ledger: Ledger) -> None:
    runner = Runner(ledger.store, ledger, FileConfig())
    try:
        assert set(runner.scheduler.jobs) >= {"sweep", "alerts", "housekeeping"}
        assert runner.scheduler.jobs["sweep"].interval == timedelta(minutes=1)
        assert runner.scheduler.lease is runner.lease
        assert runner.sweep.actor == f"scheduler:{runner.lease.holder}"
    finally:
        runner.close()


async def test_the_scheduler_starts_and_stops_with_the_apps_lifespan() -> None:
    ran = threading.Event()
    order: list[str] = []

    @contextlib.asynccontextmanager
    async def own(app: FastAPI) -> AsyncIterator[None]:
        order.append("app up")
        yield
        order.append("app down")

    app = FastAPI(lifespan=own)
    sched = Scheduler([Job("tick", timedelta(milliseconds=20), ran.set)])
    attach(app, sched)
    async with app.router.lifespan_context(app):
        assert sched.aps.running
        assert ran.wait(30)
    assert not sched.aps.running
    assert order == ["app up", "app down"]


def test_the_runner_schedules_one_sync_job_per_source(ledger: Ledger) -> None:
    cfg = FileConfig.model_validate(
        {
            "sources": [
                {
                    "name": "prod-n8n",
                    "kind": "n8n",
                    "base_url": "http://127.0.0.1:5678",
                    "interval": "30s",
                },
                {"name": "etl", "kind": "airflow", "base_url": "http://127.0.0.1:8080"},
            ]
        }
    )
    runner = Runner(ledger.store, ledger, cfg)
    try:
        assert runner.scheduler.jobs["sync:prod-n8n"].interval == timedelta(seconds=30)
        assert "sync:etl" in runner.scheduler.jobs
    finally:
        runner.close()


def test_witnesses_get_a_job_of_their_own_and_need_a_signing_key(
    ledger: Ledger, tmp_path: Path
) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from flowledger.domain.cosignatures import Cosigner
    from flowledger.services.signing import create_key
    from flowledger.storage.engine import LedgerError
    from flowledger.storage.reads.tree_proofs import ledger_origin

    vkey = Cosigner("witness.example/w1", Ed25519PrivateKey.generate()).verifier.text()
    witnesses = [{"url": "http://witness.test", "vkey": vkey}]
    with pytest.raises(LedgerError, match=r"\[\[witnesses\]\] need a signing key"):
        Runner(ledger.store, ledger, FileConfig.model_validate({"witnesses": witnesses}))
    create_key(tmp_path / "log.key", ledger_origin(ledger.store))
    cfg = FileConfig.model_validate(
        {
            "witnesses": witnesses,
            "checkpoints": {"key": str(tmp_path / "log.key"), "witness_interval": "1m"},
        }
    )
    runner = Runner(ledger.store, ledger, cfg)
    try:
        assert runner.scheduler.jobs["witnesses"].interval == timedelta(minutes=1)
    finally:
        runner.close()
