"""``flowledger run``: one long-running process with the scheduler and the webhook receiver.

The scheduler starts and stops with the receiver app's lifespan, and its gauges and job
counters join the receiver's registry, so one ``/metrics`` scrape sees the whole process.
One sync job runs per configured source.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from flowledger.config import FileConfig
from flowledger.plumbing import metrics
from flowledger.receiver.app import create_app
from flowledger.receiver.server import Tls, listen, serve_app, url, writer_ended
from flowledger.reports import observability
from flowledger.scheduled import housekeeping
from flowledger.scheduled.acting import Acting
from flowledger.scheduled.alerts import Deliverer
from flowledger.scheduled.anchors import Publisher
from flowledger.scheduled.lease import Lease
from flowledger.scheduled.scheduler import Job, Scheduler
from flowledger.scheduled.sweep import Sweep
from flowledger.scheduled.witnesses import Witnesses
from flowledger.services.ledger import Ledger
from flowledger.services.signing import configured_signer
from flowledger.storage.engine import LedgerError, Store
from flowledger.storage.reads.tree_proofs import ledger_origin
from flowledger.sync import sync_source

log = logging.getLogger(__name__)


class Runner:
    """Everything the scheduled side of the ledger needs, built from the configuration."""

    def __init__(
        self,
        store: Store,
        ledger: Ledger,
        cfg: FileConfig,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.registry = registry or CollectorRegistry()
        self.metrics = observability.register(self.registry, store, ledger.clock)
        self.lease = Lease(store, cfg.scheduler.lease, clock=ledger.clock)
        self.sweep = Sweep(ledger, cfg.sweep, cfg.sources, actor=f"scheduler:{self.lease.holder}")
        self.deliverer = Deliverer(store, cfg.alerts, clock=ledger.clock)
        self.acting = Acting(ledger, cfg.sources)
        jobs = [
            Job("sweep", cfg.sweep.interval, self.sweep.run),
            Job("alerts", cfg.scheduler.alerts_interval, self.deliverer.deliver_due),
            Job("acting", cfg.scheduler.acting_interval, self.acting.run),
            Job(
                "housekeeping",
                cfg.scheduler.housekeeping_interval,
                functools.partial(housekeeping.clean, store, ledger.clock),
            ),
            *sync_jobs(ledger, cfg),
        ]
        self.anchors: Publisher | None = None
        self.signer = configured_signer(cfg.checkpoints, ledger_origin(store))
        if cfg.anchors.enabled:
            self.anchors = Publisher(
                store, cfg.anchors, cfg.alerts.urls, clock=ledger.clock, signer=self.signer
            )
            jobs.append(Job("anchors", cfg.anchors.interval, self.anchors.publish))
        self.witnesses: Witnesses | None = None
        if cfg.witnesses and self.signer is None:
            raise LedgerError("[[witnesses]] need a signing key: set [checkpoints] key")
        if cfg.witnesses and self.signer is not None:
            self.witnesses = Witnesses(
                store, self.signer, cfg.witnesses, cfg.alerts.urls, clock=ledger.clock
            )
            jobs.append(Job("witnesses", cfg.checkpoints.witness_interval, self.witnesses.run))
        self.scheduler = Scheduler(jobs, lease=self.lease, metrics=self.metrics)

    def close(self) -> None:
        self.scheduler.shutdown()
        self.deliverer.close()
        if self.witnesses is not None:
            self.witnesses.close()


def sync_jobs(ledger: Ledger, cfg: FileConfig) -> list[Job]:
    """One job per configured source, at its interval."""
    return [
        Job(f"sync:{src.name}", src.interval, functools.partial(sync_source, ledger, src))
        for src in cfg.sources
    ]


def attach(app: Any, scheduler: Scheduler) -> None:
    """Start ``scheduler`` when the ASGI ``app`` starts and stop it when it stops, around
    whatever lifespan the app already has."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            scheduler.start()
            try:
                yield state
            finally:
                scheduler.shutdown()

    app.router.lifespan_context = lifespan


def run(
    store: Store,
    ledger: Ledger,
    cfg: FileConfig,
    *,
    host: str,
    port: int,
    tls: Tls | None = None,
    secret: bytes | None = None,
    say: Callable[[str], None] = print,
    hints: Sequence[str] = (),
) -> None:
    """Serve and schedule until SIGTERM or SIGINT, over TLS with ``tls`` (checked by
    :func:`flowledger.receiver.server.tls_files`); ``hints`` are printed before serving.
    The port is bound first: when it cannot be, :class:`CannotListen` is raised before
    anything is printed or scheduled."""
    sock = listen(host, port)
    try:
        runner = Runner(store, ledger, cfg, registry=metrics.REGISTRY)
        app = create_app(
            ledger,
            config=cfg.receiver,
            secret=secret,
            writer_process=True,
            signer=runner.signer,
        )
        attach(app, runner.scheduler)
        say(f"flowledger API on {url(sock, tls)} (docs at /docs, metrics at /metrics)")
        for hint in hints:
            say(hint)
        try:
            serve_app(app, sock, secrets=lambda: ledger.secrets, limits=cfg.receiver, tls=tls)
            writer_ended(app)
        finally:
            runner.deliverer.close()
            if runner.witnesses is not None:
                runner.witnesses.close()
    finally:
        sock.close()
