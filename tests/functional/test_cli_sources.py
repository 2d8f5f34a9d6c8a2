"""``flowledger sources``, ``sources check``, ``sync --once`` and ``executions`` as a person
runs them, against a fake n8n."""

from __future__ import annotations

import json
import sqlite3
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from flowledger.cli import common, sources
from flowledger.cli.common import app
from flowledger.services.ledger import Ledger
from flowledger.sync import connect
from tests.support.cli import N8N_SOURCE, cli_workdir
from tests.support.fakes.n8n import KEY, FakeN8n

CONFIG = N8N_SOURCE


@pytest.fixture
def n8n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeN8n:
    fake = FakeN8n()
    cli_workdir(tmp_path, monkeypatch, CONFIG, TEST_N8N_API_KEY=KEY)
    monkeypatch.setattr(connect, "make_client", lambda cfg: fake.client())
    return fake


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_sync_once_then_list_what_was_kept(n8n: FakeN8n) -> None:
    n8n.add(300)
    code, out = run("sync", "--once")
    assert code == 0, out
    assert "prod-n8n: ok: 2 pages, 300 new" in out
    code, out = run("executions", "--json", "--limit", "1000")
    kept = json.loads(out)
    assert code == 0 and {e["external_id"] for e in kept} == n8n.ids()
    code, out = run("sources")
    assert code == 0 and "prod-n8n" in out and " ok " in out
    assert KEY not in out


def test_executions_filters_by_status_and_gone(n8n: FakeN8n) -> None:
    n8n.add(3)
    (failed,) = n8n.add(1, status="error")
    run("sync", "--once")
    n8n.delete("1")
    assert run("sync", "--once", "--reconcile")[0] == 0
    code, out = run("executions", "--gone")
    assert code == 0 and out.splitlines()[1].split()[1] == "1" and len(out.splitlines()) == 2
    code, out = run("executions", "--status", "error", "--json")
    assert [e["external_id"] for e in json.loads(out)] == [failed]
    code, out = run("executions", "--limit", "2")
    assert "more: --after" in out


def test_a_stopped_source_says_why_and_exits_nonzero(n8n: FakeN8n) -> None:
    n8n.add(2)
    n8n.api_key = "another"
    code, out = run("sync", "--once")
    assert code == 1 and "prod-n8n: STOPPED: n8n refused the credentials (401)" in out
    code, out = run("sources")
    assert "stopped" in out and "401" in out


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (httpx.Response(401, json={"message": "unauthorized"}), "refused the credentials (401)"),
        (httpx.Response(403, json={"message": "Forbidden"}), "lack a permission or scope"),
        (
            httpx.Response(
                200, text="n8n is starting up. Please wait", headers={"content-type": "text/html"}
            ),
            "still starting up",
        ),
        (
            httpx.Response(200, text="<html>Grafana</html>", headers={"content-type": "text/html"}),
            "not JSON: is this the n8n API",
        ),
        (httpx.Response(404, text="Cannot GET /api/v1/executions"), "no n8n public API"),
        (
            httpx.Response(405, json={"message": "Method Not Allowed"}),
            "does not allow GET (405 Method Not Allowed): not the n8n API there; check the path "
            "in base_url",
        ),
        (
            httpx.Response(
                403, text="<html>Forbidden</html>", headers={"content-type": "text/html"}
            ),
            "the credentials lack a permission",
        ),
    ],
)
def test_sources_check_says_plainly_what_is_wrong(
    n8n: FakeN8n, answer: httpx.Response, said: str
) -> None:
    n8n.inject(answer)
    code, out = run("sources", "check", "prod-n8n")
    assert code == 1 and said in out and KEY not in out


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused")


def bad_certificate(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("handshake failed") from ssl.SSLCertVerificationError(
        "certificate verify failed: self-signed certificate"
    )


@pytest.mark.parametrize(
    ("transport", "said"), [(refused, "cannot reach n8n"), (bad_certificate, "TLS failed")]
)
def test_sources_check_names_unreachable_and_tls(
    n8n: FakeN8n, monkeypatch: pytest.MonkeyPatch, transport: Any, said: str
) -> None:
    monkeypatch.setattr(
        connect, "make_client", lambda cfg: httpx.Client(transport=httpx.MockTransport(transport))
    )
    code, out = run("sources", "check", "prod-n8n")
    assert code == 1 and said in out


def test_sources_check_ok_names_what_answered(n8n: FakeN8n) -> None:
    n8n.add(4)
    code, out = run("sources", "check", "prod-n8n")
    assert code == 0 and "n8n public API at http://n8n.test/api/v1 answers" in out


def test_an_unknown_source_or_none_configured_is_one_line(n8n: FakeN8n, tmp_path: Path) -> None:
    code, out = run("sync", "--once", "--source", "nope")
    assert code == 3 and "no source named 'nope'" in out
    (tmp_path / "flowledger.toml").write_text("")
    code, out = run("sync", "--once")
    assert code == 2 and "no sources configured" in out
    code, out = run("sync")
    assert code == 2 and "give --once" in out


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        (CONFIG.replace('"n8n"', '"zapier"'), "sources.0.kind: unknown source kind"),
        (CONFIG.replace("n8n.test", "n8n.test:99999"), "sources.0.base_url"),
        (CONFIG.replace("n8n.test", "[::1"), "sources.0.base_url"),
        (
            CONFIG.replace("base_url", "baseurl"),
            "sources.0.baseurl: unknown key; did you mean 'base_url'?\n",
        ),
    ],
)
@pytest.mark.parametrize("command", [("sync", "--once"), ("sources", "check", "prod-n8n")])
def test_a_bad_source_is_one_line_and_writes_nothing(
    n8n: FakeN8n, tmp_path: Path, bad: str, key: str, command: tuple[str, ...]
) -> None:
    (tmp_path / "flowledger.toml").write_text(bad)
    code, out = run(*command)
    assert code == 2 and out.count("\n") == 1
    assert out.startswith(f"flowledger: {tmp_path / 'flowledger.toml'}: {key}")
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        assert db.execute("SELECT count(*) FROM sources").fetchone() == (0,)


def _sources_row(name: str) -> dict[str, str]:
    """``flowledger sources`` as columns by header, for one source (times are three words)."""
    code, out = run("sources")
    assert code == 0, out
    header, *rows = out.splitlines()
    row = next(r for r in rows if r.split()[0] == name)
    starts = [header.index(h) for h in ("LAST ATTEMPT", "LAST SUCCESS", "LAG", "LAST ERROR")]
    attempt, success, lag, error = (
        row[a:b].strip() for a, b in zip(starts, [*starts[1:], len(row)], strict=True)
    )
    return {"attempt": attempt, "success": success, "lag": lag, "error": error}


def test_sources_shows_the_last_attempt_apart_from_the_last_success(
    n8n: FakeN8n, monkeypatch: pytest.MonkeyPatch
) -> None:
    hours = iter(range(1, 100))

    def ledger_an_hour_later(*args: Any, **kwargs: Any) -> Ledger:
        made = common.ledger_for(*args, **kwargs)
        made.clock = lambda at=datetime(2026, 11, 2, next(hours), tzinfo=UTC): at
        return made

    monkeypatch.setattr(sources, "ledger_for", ledger_an_hour_later)
    n8n.api_key = "another"
    assert run("sync", "--once")[0] == 1
    first = _sources_row("prod-n8n")
    assert first["attempt"] != "-" and first["success"] == "-" and first["lag"] == "never"
    assert "401" in first["error"]

    n8n.api_key = KEY
    assert run("sync", "--once")[0] == 0
    ok = _sources_row("prod-n8n")
    assert ok["success"] == ok["attempt"] != "-" and ok["error"] == "-"

    monkeypatch.setattr(
        connect, "make_client", lambda cfg: httpx.Client(transport=httpx.MockTransport(refused))
    )
    assert run("sync", "--once")[0] == 1
    failed = _sources_row("prod-n8n")
    assert (ok["attempt"], ok["success"]) == ("2026-11-02 02:00:00 UTC", "2026-11-02 02:00:00 UTC")
    assert (failed["attempt"], failed["success"]) == ("2026-11-02 03:00:00 UTC", ok["success"])
    assert "cannot reach n8n" in failed["error"]


def test_each_status_sources_shows_is_explained_in_its_help(
    n8n: FakeN8n, monkeypatch: pytest.MonkeyPatch
) -> None:
    def status() -> str:
        code, out = run("sources", "--json")
        assert code == 0, out
        return str(next(s["status"] for s in json.loads(out) if s["name"] == "prod-n8n"))

    seen = [status()]  # configured, never synced
    n8n.api_key = "another"
    run("sync", "--once")
    seen.append(status())
    n8n.api_key = KEY
    run("sync", "--once")
    seen.append(status())
    monkeypatch.setattr(
        connect, "make_client", lambda cfg: httpx.Client(transport=httpx.MockTransport(refused))
    )
    run("sync", "--once")
    seen.append(status())
    assert seen == ["new", "stopped", "ok", "error"]
    code, text = run("sources", "-h")
    assert code == 0
    explained = dict(
        line.strip().split(": ", 1)
        for line in text.split("STATUS, as")[1].splitlines()[1:]
        if line.startswith("  ") and not line.startswith("     ")
    )
    assert explained["new"] == "configured, never synced yet"
    assert set(seen) | {"unconfigured"} <= set(explained)
