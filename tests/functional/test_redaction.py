"""Secrets that a workflow, a tool or a target sends are redacted before the ledger keeps them:
nothing of them is in the database file, the export, ``show``, the handover, ``sources``, the
sync output, an alert or a log line, whether sent whole, lowercased or cut short."""

from __future__ import annotations

import io
import json
import logging
import logging.config
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from flowledger.cli.common import app, ledger_for
from flowledger.config import Settings, load_config
from flowledger.domain import FailOutcome
from flowledger.domain.redact import MARK, secrets_of
from flowledger.receiver.api.tokens import signing_secrets
from flowledger.receiver.app import create_app
from flowledger.receiver.logs import log_config, redact_handlers
from flowledger.scheduled.alerts import Deliverer
from flowledger.scheduled.scheduler import Job, Scheduler
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import Store, resolve_url, url_secrets
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import Event, Hold, Operation, Receipt, table
from flowledger.sync import connect
from tests.support.builders import FakeClock, dispatch_body, req
from tests.support.cli import cli_workdir
from tests.support.fakes.n8n import FakeN8n
from tests.support.receiver import (
    SECRET,
    Api,
    make_signing_token,
    make_token,
    receiver_config,
    running,
)

KEY = "n8nKey_Q7f3Z9xL2mP4vR8sT1uW"  # the source's API key, in TEST_N8N_API_KEY
ALERT_TOKEN = "hook-7Hq2Ld9Kx4Vb8Nm3"  # a path segment of the alert URL
SIGNED_LATER = "5f2c9a0e7b3d41c6a8e9f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b"
ALERT_URL = f"https://chat.example/services/{ALERT_TOKEN}"
CONFIG = f"""
[[sources]]
name = "prod-n8n"
kind = "n8n"
base_url = "http://n8n.test"
api_key_env = "TEST_N8N_API_KEY"

[alerts]
urls = ["{ALERT_URL}"]
"""
# Values sent after a credential's name: none may be kept anywhere.
PLANTED = (
    "TOKVAL-input-ref-1",
    "APIVAL-receipt-2",
    "PWVAL-detail-3",
    "BEARERVAL-fail-4",
    "QkFTSUNWQUwtNQ",
    "SECVAL-hook-6",
    "TOKVAL-node-7",
    "PWVAL-url-8",
)
ECHOES = {
    "whole": KEY,
    "lowercased": KEY.lower(),
    "uppercased and truncated": KEY.upper()[:12],
    "truncated to 8": KEY[:8],
    "a piece, lowercased": KEY[6:19].lower(),
}


def pieces(secret: str) -> list[str]:
    """Every 8-character piece of ``secret``, lowercased: none may be found anywhere."""
    low = secret.lower()
    return [low[i : i + 8] for i in range(len(low) - 7)]


def assert_clean(text: str, *secrets: str) -> None:
    low = text.lower()
    for planted in PLANTED:
        assert planted.lower() not in low, planted
    for secret in (KEY, ALERT_TOKEN, *secrets):
        for piece in pieces(secret):
            assert piece not in low, (secret, piece)


@pytest.fixture
def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    db = cli_workdir(
        tmp_path, monkeypatch, CONFIG, TEST_N8N_API_KEY=KEY, FLOWLEDGER_SECRET=SECRET.decode()
    )
    return str(db)


@pytest.fixture
def signing(configured: str) -> str:
    """A signing token's secret, as its holder knows it (hex)."""
    store = init_ledger(configured)[0]
    _, key = make_signing_token(Ledger(store), "signer")
    store.dispose()
    return key.hex()


@pytest.fixture
def api(configured: str, signing: str) -> Iterator[Api]:
    """The receiver over the configured ledger, as ``serve`` builds it."""
    store = init_ledger(configured)[0]
    tokens = {"write": make_token(Ledger(store), "write")}
    env = Settings()
    ledger = ledger_for(store, env, load_config(), signing_secrets(store, env.secret_bytes()))
    app_ = create_app(ledger, config=receiver_config(), secret=SECRET, token_ttl=0.0)
    with running(app_, ledger, tokens) as client:
        yield client
    store.dispose()


def call(api: Api, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = api.post(path, body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def send_everything(api: Api, signing: str) -> None:
    """What workflows and the targets they call send, secrets included, through the API."""
    op = "/v1/operations"
    call(
        api,
        f"{op}/op-ref/dispatch",
        dispatch_body(input_ref="https://files.example/in.json?token=TOKVAL-input-ref-1&v=2"),
    )
    call(
        api,
        f"{op}/op-ref/confirm",
        {
            "receipt": f"INV-42 api_key=APIVAL-receipt-2 {KEY.lower()}",
            "detail": f'{{"password": "PWVAL-detail-3", "echo": "{KEY[:10]}", "sig": "{signing}"}}',
        },
    )
    call(api, f"{op}/op-secret/dispatch", dispatch_body("exec-2"))
    call(api, f"{op}/op-secret/confirm", {"receipt": KEY.upper()})
    call(api, f"{op}/op-unknown/dispatch", dispatch_body("exec-3"))
    call(
        api,
        f"{op}/op-unknown/fail",
        {
            "outcome": "unknown",
            "error": "401 from target: Authorization: Bearer BEARERVAL-fail-4"
            f" key={KEY.upper()[:12]} url https://svc:PWVAL-url-8@api.example/x"
            f" alert {ALERT_TOKEN}",
        },
    )
    call(api, f"{op}/op-hook/dispatch", dispatch_body("77"))
    hooked = call(
        api,
        "/v1/hooks/n8n/error",
        {
            "execution": {
                "id": "77",
                "lastNodeExecuted": "Write token=TOKVAL-node-7",
                "error": {
                    "name": "NodeApiError",
                    "message": f"Basic QkFTSUNWQUwtNQ== refused; secret=SECVAL-hook-6 {KEY[4:16]}",
                },
            },
            "workflow": {"id": "wf", "name": f"send invoices {KEY.lower()[:9]}"},
        },
    )
    assert hooked["matched"] == 1


def test_what_the_api_receives_is_redacted_in_the_database_file_export_show_and_alert(
    api: Api, configured: str, signing: str
) -> None:
    send_everything(api, signing)
    store = api.ledger.store
    with store.reader.connect() as conn:
        receipts = dict(
            conn.execute(
                sa.select(table(Operation).c.operation_id, table(Operation).c.receipt)
            ).all()
        )
        hold = conn.execute(sa.select(table(Hold).c.detail)).scalars().all()
        refs = conn.execute(sa.select(table(Operation).c.input_ref)).scalars().all()
        events = conn.execute(sa.select(table(Event).c.data)).scalars().all()
        details = conn.execute(sa.select(table(Receipt).c.detail)).scalars().all()
    assert receipts["op-ref"] == f"INV-42 api_key={MARK} {MARK}"
    assert receipts["op-secret"] == MARK  # a receipt that is a secret is still one
    assert any("Bearer [redacted]" in d for d in hold)
    assert any("at node Write token=[redacted]" in d for d in hold), hold
    assert "https://files.example/in.json?token=[redacted]&v=2" in refs
    assert f'"password": "{MARK}"' in "".join(d or "" for d in details)
    # Ids and hashes are kept exact.
    assert set(receipts) == {"op-ref", "op-secret", "op-unknown", "op-hook"}
    assert any(
        '"input_hash": "hmac-sha256:' in e or '"input_hash":"hmac-sha256:' in e for e in events
    )

    # The alert, as the deliverer posts it.
    posted: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        posted.append(json.loads(request.content))
        return httpx.Response(200)

    cfg = load_config()
    client = httpx.Client(transport=httpx.MockTransport(handler))
    assert Deliverer(store, cfg.alerts, client=client).deliver_due().sent == 2
    alerts = json.dumps(posted)
    assert "Bearer [redacted]" in alerts and "NodeApiError" in alerts
    assert_clean(alerts, signing)

    # The database file itself, every page and the write-ahead log.
    store.dispose()
    kept = b"".join(
        p.read_bytes() for p in Path(configured).parent.glob("ledger.db*") if p.is_file()
    )
    assert b"op-unknown" in kept
    assert_clean(kept.decode("latin-1"), signing)

    # What people and other tools read.
    exported = CliRunner().invoke(app, ["export"])
    assert exported.exit_code == 0 and "Bearer [redacted]" in exported.output
    assert_clean(exported.output, signing)
    for op in ("op-ref", "op-secret", "op-unknown", "op-hook"):
        shown = CliRunner().invoke(app, ["show", op])
        assert shown.exit_code == 0 and op in shown.output, shown.output
        assert_clean(shown.output, signing)
    report = CliRunner().invoke(app, ["handover"])
    assert report.exit_code == 0 and "op-unknown" in report.output
    assert_clean(report.output, signing)


@pytest.mark.parametrize("echo", list(ECHOES.values()), ids=list(ECHOES))
def test_an_echoed_key_is_redacted_in_every_stored_text(
    store: Store, clock: FakeClock, echo: str
) -> None:
    """SQLite and PostgreSQL: the rows a confirm, a fail and a hold write."""
    ledger = Ledger(store, clock=clock, secrets=secrets_of([KEY]))
    ledger.dispatch("op-1", req(input_ref=f"s3://bucket/{echo}")).run("wf")
    ledger.confirm("op-1", f"R-{echo}", detail=f"target said {echo}").run("wf")
    ledger.dispatch("op-2", req("exec-2")).run("wf")
    ledger.fail("op-2", FailOutcome.UNKNOWN, f"key {echo} refused").run("wf")
    with store.reader.connect() as conn:
        rows = [
            json.dumps([list(r) for r in conn.execute(sa.select(table(t)))], default=str)
            for t in (Operation, Receipt, Hold, Event)
        ]
    assert_clean("".join(rows))
    assert f"R-{MARK}" in rows[0] and f"key {MARK} refused" in rows[2]


def test_sync_keeps_no_echoed_key_in_copies_sources_output_or_handover(
    configured: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeN8n(api_key=KEY)
    fake.workflows["wf-1"] = f"send invoices {KEY.lower()}"
    fake.add(2)
    monkeypatch.setattr(connect, "make_client", lambda cfg: fake.client())
    synced = CliRunner().invoke(app, ["sync", "--once"])
    assert synced.exit_code == 0, synced.output
    fake.inject(
        httpx.Response(401, json={"message": f"key {KEY.lower()[:14]}… is not valid; token={KEY}"})
    )
    stopped = CliRunner().invoke(app, ["sync", "--once"])
    fake.inject(httpx.Response(400, json={"message": f"bad X-N8N-API-KEY {KEY.upper()[2:]}"}))
    checked = CliRunner().invoke(app, ["sources", "check", "prod-n8n"])
    assert stopped.exit_code == 1 and "refused the credentials (401)" in stopped.output
    assert MARK in stopped.output
    assert checked.exit_code == 1 and MARK in checked.output
    sources = CliRunner().invoke(app, ["sources"])
    executions = CliRunner().invoke(app, ["executions", "--json"])
    report = CliRunner().invoke(app, ["handover"])
    assert "stopped" in sources.output and MARK in sources.output
    assert r"token=\[redacted\]" in report.output  # Markdown-escaped
    assert json.loads(executions.output)[0]["workflow_name"] == f"send invoices {MARK}"
    for out in (stopped, checked, sources, executions, report):
        assert_clean(out.output)
    kept = b"".join(p.read_bytes() for p in Path(configured).parent.glob("ledger.db*"))
    assert_clean(kept.decode("latin-1"))


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("flowledger.scheduled.scheduler")
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def test_a_failing_job_logs_its_error_and_traceback_redacted(log_stream: io.StringIO) -> None:
    secrets = secrets_of([KEY])
    redact_handlers(logging.getLogger("flowledger.scheduled.scheduler"), secrets)

    def sync() -> None:
        raise RuntimeError(
            f"GET http://n8n.test/api?api_key=APIVAL-receipt-2 said {KEY.lower()[:11]}; "
            "Authorization: Bearer BEARERVAL-fail-4"
        )

    job = Job("sync:prod-n8n", timedelta(minutes=1), sync, needs_lease=False)
    assert Scheduler([]).run_job(job) is False
    logged = log_stream.getvalue()
    assert "job sync:prod-n8n failed" in logged and "Traceback" in logged
    assert "Bearer [redacted]" in logged and "RuntimeError" in logged
    assert_clean(logged)


def test_the_servers_log_configuration_redacts_every_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    known = [secrets_of([KEY])]  # as the ledger's secrets are now
    logging.config.dictConfig(log_config(secrets=lambda: known[0]))
    try:
        logging.getLogger("flowledger.receiver").error("target answered %s", KEY.lower())
        known[0] = secrets_of([KEY, SIGNED_LATER])  # a signing token created while serving
        logging.getLogger("flowledger.receiver").error("node sent %s", SIGNED_LATER[:20])
        logging.getLogger("uvicorn.error").error("token=TOKVAL-node-7 at startup")
        access = logging.getLogger("uvicorn.access")
        access.info(
            '%s - "%s %s HTTP/%s" %d',
            *("127.0.0.1:5000", "POST", f"/v1/operations/{KEY.lower()}/confirm?x=1", "1.1", 200),
        )
    finally:
        for name in ("flowledger", "uvicorn", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)  # as it was: later tests read these through caplog
            logger.handlers.clear()
            logger.propagate = True
            logger.setLevel(logging.NOTSET)
    captured = capsys.readouterr()
    logged = captured.err
    assert f"target answered {MARK}" in logged and f"token={MARK} at startup" in logged
    assert f"node sent {MARK}" in logged
    assert f'"POST /v1/operations/{MARK}/confirm HTTP/1.1" 200' in captured.out
    assert_clean(logged + captured.out, SIGNED_LATER)


def test_a_signing_token_created_while_the_receiver_runs_is_redacted_from_its_first_request(
    api: Api,
) -> None:
    _, key = make_signing_token(api.ledger, "made-later")
    later = key.hex()
    call(api, "/v1/operations/op-later/dispatch", dispatch_body("exec-later"))
    call(
        api,
        "/v1/operations/op-later/confirm",
        {"receipt": f"R-{later[:12]}", "detail": f"the node sent {later.upper()}"},
    )
    with api.ledger.store.reader.connect() as conn:
        rows = json.dumps(
            [
                list(r)
                for t in (Operation, Receipt, Event)
                for r in conn.execute(sa.select(table(t)))
            ],
            default=str,
        )
    assert f"R-{MARK}" in rows and f"the node sent {MARK}" in rows
    assert_clean(rows, later)


DB_PASSWORD = "pgPw_Z8r4Kq2Xv7Nd"  # in the database URL (the test server does not check it)


@pytest.mark.postgres
def test_the_database_urls_password_is_redacted_from_a_hook_error_stored_and_shown(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sa.make_url(pg_url).set(password=DB_PASSWORD).render_as_string(hide_password=False)
    cli_workdir(tmp_path, monkeypatch, CONFIG, TEST_N8N_API_KEY=KEY)
    monkeypatch.setenv("FLOWLEDGER_DB", url)  # the CLI below opens it from the environment
    store = init_ledger(url)[0]
    tokens = {"write": make_token(Ledger(store), "write")}
    ledger = ledger_for(store, Settings(), load_config())
    app_ = create_app(ledger, config=receiver_config(), token_ttl=0.0)
    message = (
        f"FATAL: login to {pg_url} refused (tried {DB_PASSWORD});"
        f" retrying as {DB_PASSWORD.upper()[:10]}"
    )
    with running(app_, ledger, tokens) as api:
        call(api, "/v1/operations/op-db/dispatch", dispatch_body("88"))
        hooked = call(
            api,
            "/v1/hooks/n8n/error",
            {
                "execution": {
                    "id": "88",
                    "lastNodeExecuted": "Save",
                    "error": {"name": "DatabaseError", "message": message},
                },
                "workflow": {"id": "wf", "name": "load"},
            },
        )
        assert hooked["matched"] == 1
    with store.reader.connect() as conn:
        details = conn.execute(sa.select(table(Hold).c.detail)).scalars().all()
        events = conn.execute(sa.select(table(Event).c.data)).scalars().all()
    store.dispose()
    assert any(f"(tried {MARK}); retrying as {MARK}" in d for d in details), details
    assert_clean(json.dumps([details, events]), DB_PASSWORD)
    shown = CliRunner().invoke(app, ["show", "op-db"])
    assert shown.exit_code == 0 and "DatabaseError" in shown.output, shown.output
    assert f"tried {MARK}" in shown.output
    exported = CliRunner().invoke(app, ["export"])
    assert exported.exit_code == 0 and "DatabaseError" in exported.output
    assert_clean(shown.output + exported.output, DB_PASSWORD)


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("postgresql://ledger:p%40ss%3Aw0rd99@db.internal/fl", ["p@ss:w0rd99", "p%40ss%3Aw0rd99"]),
        ("postgresql://ledger@db.internal/fl?password=QPw1234567", ["QPw1234567"]),
        ("postgresql://ledger@db.internal/fl", []),
        ("var/ledger.db", []),
    ],
    ids=["encoded", "query", "none", "sqlite"],
)
def test_the_database_urls_password_is_a_configured_secret_as_written_and_decoded(
    url: str, secrets: list[str]
) -> None:
    assert url_secrets(resolve_url(url)) == secrets


# One text a target might answer with per redaction case, and what of it must be kept
# nowhere: the credential after its name, or the configured secret (every piece of 8).
CASES = {
    "Authorization: Bearer": ("Authorization: Bearer c2VjcmV0LWJlYXJlcg", "c2VjcmV0LWJlYXJlcg"),
    "Authorization: Basic": ('"authorization": "Basic dXNlcjpwYXNzd29yZA=="', "dXNlcjpwYXNz"),
    "Bearer in prose": ("retried with bearer Zm9vYmFyYmF6cXV4 and got 401", "Zm9vYmFyYmF6"),
    "api_key= in text": ("rejected api_key=AK-77f1c2d9 for tenant 4", "AK-77f1c2d9"),
    "api_key= in a query": (
        "GET https://api.example/v2/items?api_key=AK-91e0d3&page=2",
        "AK-91e0d3",
    ),
    "token= in text": ("refresh failed: token=TK-5c8e2b1f", "TK-5c8e2b1f"),
    "token= in a query": ("GET https://api.example/v2?page=2&token=TK-0d9a4e7c#x", "TK-0d9a4e7c"),
    "password= in text": ("login as bob with password=PW-hunter2-x", "PW-hunter2-x"),
    "password= in a query": (
        "POST https://idp.example/login?user=bob&password=PW-q7w8e9",
        "PW-q7w8e9",
    ),
    "secret= in text": ("webhook secret=SC-b4d5e6f7 does not match", "SC-b4d5e6f7"),
    "secret= in a query": ("GET https://x.example/cb?client_secret=SC-1a2b3c4d&s=1", "SC-1a2b3c4d"),
    "the source key": (f"key {KEY} is not valid", KEY),
    "the source key, lowercased": (f"key {KEY.lower()} is not valid", KEY),
    "the source key, uppercased": (f"key {KEY.upper()} is not valid", KEY),
    "the source key, its first 8": (f"key {KEY[:8]}… is not valid", KEY),
    "the source key, cut and lowercased": (f"X-N8N-KEY={KEY.lower()[:13]}", KEY),
    "the source key, a piece": (f"got '{KEY[7:19]}'", KEY),
    "the ledger's secret, uppercased": (f"hmac {SECRET.decode().upper()}", SECRET.decode()),
    "an alert URL's token, lowercased": (f"posted to {ALERT_TOKEN.lower()}", ALERT_TOKEN),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_redaction_case_reaches_neither_the_file_the_log_export_nor_an_alert(
    configured: str, case: str
) -> None:
    text, kept = CASES[case]
    secret = kept if kept in (KEY, ALERT_TOKEN, SECRET.decode()) else None

    def clean(where: str, out: str) -> None:
        low = out.lower()
        assert MARK in out, f"{case}: the text never reached {where}"
        if secret is None:
            assert kept.lower() not in low, f"{case}: kept in {where}"
        else:
            assert not [p for p in pieces(secret) if p in low], f"{case}: kept in {where}"

    store = init_ledger(configured)[0]
    ledger = ledger_for(store, Settings(), load_config())
    ledger.dispatch("op-1", req("exec-1")).run("wf")
    ledger.fail("op-1", FailOutcome.UNKNOWN, f"target said: {text}").run("wf")  # a hold

    posted: list[bytes] = []
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: posted.append(r.content) or httpx.Response(200))
    )
    assert Deliverer(store, load_config().alerts, client=client).deliver_due().sent == 1
    clean("the alert", b"".join(posted).decode())

    # A job failing with the same text logs it through the redacting handlers of `run`.
    stream = io.StringIO()
    logger = logging.getLogger("flowledger.scheduled.scheduler")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        redact_handlers(logger, lambda: ledger.secrets)

        def sync() -> None:
            raise RuntimeError(f"n8n answered 401: {text}")

        Scheduler([]).run_job(Job("sync:prod-n8n", timedelta(minutes=1), sync, needs_lease=False))
    finally:
        logger.removeHandler(handler)
    clean("the log", stream.getvalue())

    store.dispose()
    clean(
        "the database file",
        b"".join(p.read_bytes() for p in Path(configured).parent.glob("ledger.db*")).decode(
            "latin-1"
        ),
    )
    exported = CliRunner().invoke(app, ["export"])
    assert exported.exit_code == 0, exported.output
    clean("export", exported.output)
