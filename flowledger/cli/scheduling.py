"""The long-running process and its jobs one at a time: ``run``, ``sweep``, ``alerts``,
``housekeeping``, ``anchor`` (the last four with ``--once``, for people who prefer cron)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    DbOption,
    HostOption,
    LogFormatOption,
    PortOption,
    TlsCertOption,
    TlsKeyOption,
    app,
    die,
    file_settings,
    ledger_for,
    logging_as,
    one_line_errors,
    opened,
    settings,
)
from flowledger.cli.tables import echo_table
from flowledger.domain.display import counted

if TYPE_CHECKING:
    from flowledger.config import FileConfig, LogFormat
    from flowledger.storage.engine import Store

OnceOption = Annotated[bool, typer.Option("--once", help="Run the job once now and exit")]


def _logging(log_format: LogFormat = "plain") -> None:
    from flowledger.receiver.logs import stderr_handler

    logging.basicConfig(level=logging.INFO, handlers=[stderr_handler(log_format)])
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _need_once(once: bool, job: str) -> None:
    if not once:
        die(f"`flowledger {job}` runs with --once (e.g. from cron); `flowledger run` schedules it")


@app.command()
@one_line_errors
def run(
    db: DbOption = None,
    host: HostOption = None,
    port: PortOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    log_format: LogFormatOption = None,
) -> None:
    """Run the ledger: the webhook receiver and the scheduled jobs (sync, sweep, alerts)."""
    from flowledger.receiver.server import tls_files

    env = settings()
    cfg = logging_as(file_settings(), env, log_format)
    tls = tls_files(tls_cert or cfg.receiver.tls_cert, tls_key or cfg.receiver.tls_key)
    # The receiver, the jobs and the ledger's services, loaded once the TLS files are checked.
    from flowledger.programs import runner
    from flowledger.receiver.api.tokens import signing_secrets
    from flowledger.receiver.logs import redact_handlers
    from flowledger.storage.engine import hide_password

    _logging(cfg.receiver.log_format)
    # In JSON, the lines before serving are log records too: every line a shipper reads parses.
    say = typer.echo if cfg.receiver.log_format == "plain" else logging.getLogger("flowledger").info
    with opened(db) as store:
        where = f" --db {db}" if db else ""
        ledger = ledger_for(store, env, cfg, signing_secrets(store, env.secret_bytes()))
        # The jobs log through the root logger (uvicorn's configuration keeps it).
        redact_handlers(logging.getLogger(), lambda: ledger.secrets)
        runner.run(
            store,
            ledger,
            cfg,
            secret=env.secret_bytes(),
            host=host or cfg.receiver.host,
            port=cfg.receiver.port if port is None else port,
            tls=tls,
            say=say,
            hints=[
                f"  create a token: flowledger token create --name NAME --scope write{where}",
                f"  open the TUI:   flowledger tui{where}",
                f"  database:       {hide_password(store.url)}",
            ],
        )


@app.command()
@one_line_errors
def sweep(db: DbOption = None, once: OnceOption = False) -> None:
    """Open the holds that are due (unknown outcome, failed or stuck executions, stale
    prepared operations and sources, overdue holds), then deliver pending alerts."""
    from flowledger.scheduled.sweep import Sweep

    _need_once(once, "sweep")
    cfg = file_settings()
    with opened(db) as store:
        result = Sweep(ledger_for(store, file=cfg), cfg.sweep, cfg.sources).run()
        typer.echo(f"sweep opened {counted(result.total, 'hold')}")
        echo_table(
            [(reason, count) for reason, count in sorted(result.opened.items()) if count],
            indent=2,
            right={1},
        )
        if cfg.alerts.urls:
            _deliver(store, cfg)


@app.command()
@one_line_errors
def alerts(db: DbOption = None, once: OnceOption = False) -> None:
    """Deliver the alerts that are due to the [alerts] urls."""

    _need_once(once, "alerts")
    cfg = file_settings()
    with opened(db) as store:
        _deliver(store, cfg)


def _deliver(store: Store, cfg: FileConfig) -> None:
    from flowledger.scheduled.alerts import Deliverer

    deliverer = Deliverer(store, cfg.alerts)
    try:
        result = deliverer.deliver_due()
    finally:
        deliverer.close()
    typer.echo(
        f"alerts: {result.sent} delivered, {result.failed} to retry later"
        + (f", {result.unroutable} for URLs no longer configured" if result.unroutable else "")
    )


@app.command()
@one_line_errors
def act(db: DbOption = None, once: OnceOption = False) -> None:
    """Pin the executions open holds are about, and make the retries asked with
    `hold ID release --retry`, in n8n (what `run` does every [scheduler] acting_interval)."""
    from flowledger.cli.pins import echo_waiting
    from flowledger.scheduled.acting import Acting
    from flowledger.storage import acting

    _need_once(once, "act")
    cfg = file_settings()
    with opened(db) as store:
        done = Acting(ledger_for(store, file=cfg), cfg.sources).run()
        with store.reader.connect() as conn:
            found = acting.waiting(conn)
    count = {what: sum(w["count"] for w in found if w["what"] == what) for what in ("pin", "retry")}
    typer.echo(
        f"pinned {counted(done.pinned, 'execution')} ({count['pin']} waiting), "
        f"retried {counted(done.retried, 'execution')}, {done.refused} refused "
        f"({count['retry']} waiting)"
    )
    echo_waiting(found)


@app.command(name="housekeeping")
@one_line_errors
def housekeeping_(db: DbOption = None, once: OnceOption = False) -> None:
    """Delete expired idempotency keys, signatures past their window and alerts delivered over
    a week ago."""
    from flowledger.scheduled import housekeeping

    _need_once(once, "housekeeping")
    with opened(db) as store:
        done = housekeeping.clean(store)
    typer.echo(
        f"removed {counted(done.idempotency_keys, 'expired idempotency key')}, "
        f"{counted(done.delivered_alerts, 'delivered alert')}, "
        f"{counted(done.signatures, 'expired signature')}"
    )


@app.command()
@one_line_errors
def anchor(db: DbOption = None, once: OnceOption = False) -> None:
    """Publish the chain head to the [anchors] file and/or alert URLs (when it moved since
    the last one published)."""
    from flowledger.scheduled.anchors import Publisher

    _need_once(once, "anchor")
    cfg = file_settings()
    if not cfg.anchors.enabled:
        die("no [anchors] file or alerts configured; see README, 'Anchoring the chain head'")
    with opened(db) as store:
        published = Publisher(store, cfg.anchors, cfg.alerts.urls).publish()
    if published is None:
        typer.echo("the head has not moved since it was last published; nothing to do")
    else:
        typer.echo(f"published head seq {published.seq} hash {published.hash}")
