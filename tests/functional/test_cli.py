"""The CLI as a person uses it: every command, the tamper checks, and bad input."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.cli.database import autovacuum_finding, wal_reset_finding
from flowledger.domain import FailOutcome
from flowledger.services import ledger as ledger_module
from flowledger.services.ledger import Ledger
from flowledger.storage.engine import CHECKPOINT_EVERY, WAL_RESET_AFFECTED, open_store
from flowledger.storage.migrate import init_ledger
from flowledger.storage.models import SCHEMA_VERSION
from flowledger.storage.reads.meta import identity
from tests.support.builders import req
from tests.support.database import engine_for, rebuild_tree

runner = CliRunner()


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def busy_ledger(db_url: str) -> str:
    """A ledger with a confirmed, a held and a dispatching operation."""
    store, _ = init_ledger(db_url)
    ledger = Ledger(store)
    ledger.dispatch("invoice:1", req("e1")).run("token:n8n")
    ledger.confirm("invoice:1", "R-1").run("token:n8n")
    ledger.dispatch("invoice:2", req("e2")).run("token:n8n")
    ledger.fail("invoice:2", FailOutcome.UNKNOWN, "timeout").run("token:n8n")
    ledger.dispatch("invoice:3", req("e3")).run("token:n8n")
    store.dispose()
    return db_url


def test_init_creates_once_and_then_leaves_it(tmp_path: Path) -> None:
    db = str(tmp_path / "sub" / "ledger.db")
    code, out, _ = cli("init", "--db", db)
    assert code == 0 and "created ledger" in out
    code, out, _ = cli("init", "--db", db)
    assert code == 0 and "already exists" in out


def test_status_counts_states_and_holds(busy_ledger: str) -> None:
    code, out, _ = cli("status", "--db", busy_ledger)
    assert code == 0
    assert "confirmed    1" in out and "dispatching  2" in out
    assert "open holds: 1 (blocking 1, overdue 0)" in out
    assert "unknown_outcome" in out


def test_show_prints_the_timeline(busy_ledger: str) -> None:
    code, out, _ = cli("show", "invoice:2", "--db", busy_ledger)
    assert code == 0
    (held,) = [line for line in out.splitlines() if "unknown_outcome (blocking)" in line]
    assert held.split()[1:5] == ["unknown_outcome", "(blocking)", "OPEN,", "due"]
    assert out.index("dispatched") < out.index("hold_opened") < out.index("failed_unknown")
    code, out, _ = cli("show", "invoice:2", "--db", busy_ledger, "--json")
    assert json.loads(out)["operation"]["state"] == "dispatching"


def test_show_says_its_times_are_utc_an_empty_part_is_none_and_a_past_deadline_is_gone(
    busy_ledger: str,
) -> None:
    code, confirmed, _ = cli("show", "invoice:1", "--db", busy_ledger)
    assert code == 0
    assert confirmed.splitlines()[0] == "operation  invoice:1"
    assert "holds:\n  (none)\n" in confirmed  # no hold was ever opened about it
    assert "deadline" not in confirmed.split("attempts:")[0]  # confirmed: nothing is due
    code, dispatching, _ = cli("show", "invoice:3", "--db", busy_ledger)
    assert "  deadline " in dispatching.split("attempts:")[0]
    assert "receipts:\n  (none)\n" in dispatching


def test_show_unknown_operation_exits_3(busy_ledger: str) -> None:
    code, _, err = cli("show", "nope", "--db", busy_ledger)
    assert code == 3 and err == "flowledger: no operation 'nope'\n"


def test_show_reads_an_id_stored_before_the_segment_rule(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads take any stored id: the person cleaning up ``invoice:undefined:send`` sees it."""
    store, _ = init_ledger(db_url)
    with monkeypatch.context() as patched:
        patched.setattr(ledger_module, "check_operation_id", lambda value: value)
        Ledger(store).dispatch("invoice:undefined:send", req("e1")).run("token:n8n")
    store.dispose()
    code, out, _ = cli("show", "invoice:undefined:send", "--db", db_url)
    assert code == 0 and "operation  invoice:undefined:send" in out


def test_export_writes_every_event_as_json_lines(busy_ledger: str) -> None:
    code, out, _ = cli("export", "--format", "jsonl", "--db", busy_ledger)
    events = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [e["seq"] for e in events] == list(range(1, len(events) + 1))
    code, out, err = cli("export", "--since", "2999-01-01", "--db", busy_ledger)
    assert code == 2 and out == "" and "is in the future" in err and err.count("\n") == 1


def test_doctor_reports_the_database(busy_ledger: str) -> None:
    code, out, _ = cli("doctor", "--db", busy_ledger)
    assert code == 0 and f"schema version:  {SCHEMA_VERSION}" in out
    if "://" not in busy_ledger:
        assert "journal mode:    wal" in out and "synchronous:     FULL" in out
        line = next(line for line in out.splitlines() if line.startswith("wal-reset bug:"))
        assert line.split(":", 1)[1].strip() == wal_reset_finding(WAL_RESET_AFFECTED)
    else:
        assert "postgresql:" in out
        engine = engine_for(busy_ledger)
        with engine.connect() as conn:
            autovacuum = conn.exec_driver_sql("SHOW autovacuum").scalar()
        engine.dispose()
        line = next(line for line in out.splitlines() if line.startswith("autovacuum:"))
        assert ("WARNING: off" in line) == (autovacuum == "off"), line


@pytest.mark.parametrize(
    ("recorded_with", "now_set", "said"),
    [
        (None, None, "not set (input hashes are plain SHA-256; set it before the first write"),
        (None, "k1", "WARNING: set, but the newest operation's input hash is sha256: (made "),
        ("k1", "k1", "set (input hashes are HMAC-SHA-256)"),
        ("k1", "k2", "set (input hashes are HMAC-SHA-256)"),  # another key: not seen
        ("k1", None, "WARNING: not set, but the newest operation's input hash is hmac-sha256:"),
    ],
)
def test_doctor_says_whether_a_secret_is_set_and_when_the_ledger_was_hashed_otherwise(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded_with: str | None,
    now_set: str | None,
    said: str,
) -> None:
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    secret = recorded_with.encode() if recorded_with else None
    Ledger(store, secret=secret).dispatch("invoice:1", req("e1")).run("token:n8n")
    store.dispose()
    if now_set is None:
        monkeypatch.delenv("FLOWLEDGER_SECRET", raising=False)
    else:
        monkeypatch.setenv("FLOWLEDGER_SECRET", now_set)
    code, out, _ = cli("doctor", "--db", str(tmp_path / "ledger.db"))
    line = next(line for line in out.splitlines() if line.startswith("secret:"))
    assert code == 0 and line.split(":", 1)[1].strip().startswith(said), line
    assert "input_mismatch" in line if "WARNING" in said else "WARNING" not in line
    if now_set:
        assert now_set not in line


def test_doctor_says_the_wal_reset_bug_is_mitigated_on_a_build_that_has_it() -> None:
    assert wal_reset_finding(False) == "not affected"
    line = wal_reset_finding(True)
    assert line.startswith("affected (3.7.0-3.51.2 but 3.44.6, 3.50.7) and mitigated: ")
    assert "wal_autocheckpoint = 0" in line
    assert "wal_checkpoint(PASSIVE)) while it holds the writer lock" in line
    assert f"every {CHECKPOINT_EVERY} commits" in line
    assert "corrupt" not in line and "WARNING" not in line


def test_the_mitigation_doctor_names_is_in_place(tmp_path: Path) -> None:
    """On an affected build no connection of the ledger checkpoints on its own (SQLite's
    default is every 1000 pages)."""
    store, _ = init_ledger(str(tmp_path / "ledger.db"))
    try:
        for engine in (store.engine, store.reader):
            with engine.connect() as conn:
                pages = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
            assert pages == (0 if WAL_RESET_AFFECTED else 1000)
    finally:
        store.dispose()


@pytest.mark.parametrize(
    ("settings", "warning"),
    [
        (("on", "on", []), None),
        (("off", "on", []), "WARNING: off:"),
        ((None, "on", []), "WARNING: None:"),
        (("on", "off", []), "WARNING: on, but track_counts is off"),
        (
            ("on", "on", ["executions", "holds"]),
            "WARNING: on, but turned off for executions, holds:",
        ),
    ],
)
def test_doctor_warns_unless_autovacuum_can_work(settings: Any, warning: str | None) -> None:
    line = autovacuum_finding(*settings)
    assert (line == "on") if warning is None else line.startswith(warning), line


def test_doctor_names_a_ledger_table_that_turns_autovacuum_off(pg_url: str) -> None:
    init_ledger(pg_url)[0].dispose()
    engine = engine_for(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE holds SET (autovacuum_enabled = false)")
        server_wide = conn.exec_driver_sql("SHOW autovacuum").scalar()
    engine.dispose()
    code, out, _ = cli("doctor", "--db", pg_url)
    line = next(line for line in out.splitlines() if line.startswith("autovacuum:"))
    named = "WARNING: on, but turned off for holds:" if server_wide == "on" else "WARNING: off:"
    assert code == 0 and named in line, line


def test_doctor_hides_the_password(pg_url: str) -> None:
    init_ledger(pg_url)[0].dispose()
    with_password = pg_url.replace("postgres@", "postgres:hunter2@")
    code, out, _ = cli("doctor", "--db", with_password)
    assert code == 0 and "hunter2" not in out and "***" in out


# ---------------------------------------------------------------------------- tampering


def tamper(db: str, sql: str) -> None:
    """Change the events table behind the ledger's back (the trigger dropped first)."""
    engine = engine_for(db)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER events_no_update")
            conn.exec_driver_sql("DROP TRIGGER events_no_delete")
        else:
            conn.exec_driver_sql("DROP TRIGGER events_no_update ON events")
            conn.exec_driver_sql("DROP TRIGGER events_no_delete ON events")
        conn.exec_driver_sql(sql)
    engine.dispose()


def test_verify_passes_and_prints_the_head(busy_ledger: str) -> None:
    code, out, _ = cli("verify", "--db", busy_ledger)
    assert code == 0 and out.startswith("chain ok: 6 events")


def test_verify_names_the_changed_event(busy_ledger: str) -> None:
    tamper(busy_ledger, 'UPDATE events SET data = \'{"receipt":"R-forged"}\' WHERE seq = 3')
    code, out, _ = cli("verify", "--db", busy_ledger)
    assert code == 1 and "BROKEN at seq 3" in out


def test_verify_catches_a_deleted_event_in_the_middle(busy_ledger: str) -> None:
    tamper(busy_ledger, "DELETE FROM events WHERE seq = 4")
    code, out, _ = cli("verify", "--db", busy_ledger)
    assert code == 1 and "BROKEN at seq 4" in out


def test_verify_catches_a_deleted_last_event_with_the_expected_head(busy_ledger: str) -> None:
    code, out, _ = cli("verify", "--db", busy_ledger)
    head = out.split("hash ")[-1].strip()
    # Remove the last event and make the head row agree, as a careful forger would.
    tamper(busy_ledger, "DELETE FROM events WHERE seq = 6")
    tamper_head = "UPDATE chain_head SET seq = 5, hash = (SELECT hash FROM events WHERE seq = 5)"
    engine = engine_for(busy_ledger)
    with engine.begin() as conn:
        conn.exec_driver_sql(tamper_head)
    code, out, _ = cli("verify", "--db", busy_ledger)
    # The tree's subtree over events 5 and 6 outlived event 6.
    assert code == 1 and "over events 5-6, past the chain's end at 5" in out, out
    with engine.begin() as conn:
        rebuild_tree(conn)  # a forger who knows the tree
    engine.dispose()
    assert cli("verify", "--db", busy_ledger)[0] == 0  # the chain itself is consistent
    code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", head)
    now = out.split("head is ")[1].split(",")[0]
    assert code == 1 and out == (
        f"head MISMATCH: this ledger's head is {now}, you expected {head} (a different "
        "ledger, or events removed or rewritten at the end); the 5 events themselves chain "
        "correctly up to seq 5\n"
    )


def test_verify_with_a_mistyped_head_says_which_head_it_found(busy_ledger: str) -> None:
    code, out, _ = cli("verify", "--db", busy_ledger)
    head = out.split("hash ")[-1].strip()
    typo = head[:-1] + ("1" if head.endswith("0") else "0")
    code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", typo)
    assert code == 1 and "BROKEN" not in out
    assert f"this ledger's head is {head}, you expected {typo} (a different" in out


def test_verify_takes_the_head_prefix_the_ui_shows(busy_ledger: str) -> None:
    head = cli("verify", "--db", busy_ledger)[1].split("hash ")[-1].strip()
    for given in (head[:12], head[:12] + "…", head[:20].upper()):
        code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", given)
        assert (code, out.splitlines()[-1]) == (0, "expected head ok: it is the head"), given


def test_verify_takes_an_earlier_head_and_says_how_many_events_followed(busy_ledger: str) -> None:
    earlier = cli("verify", "--db", busy_ledger)[1].split("hash ")[-1].strip()
    store = open_store(busy_ledger)
    Ledger(store).dispatch("invoice:4", req("e4")).run("token:n8n")
    store.dispose()
    code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", earlier[:12])
    assert code == 0 and out.startswith("chain ok: 7 events, head seq 7 ")
    assert out.endswith("\nexpected head ok: it is the hash of event 6, 1 event appended since\n")


def test_verify_takes_this_empty_ledgers_head_and_not_all_zeros(busy_ledger: str) -> None:
    engine = engine_for(busy_ledger)
    with engine.connect() as conn:
        genesis = identity(conn)[1]
    engine.dispose()
    code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", genesis)
    assert code == 0 and out.endswith(
        "\nexpected head ok: it is the head of the empty ledger, 6 events appended since\n"
    )
    code, out, _ = cli("verify", "--db", busy_ledger, "--expect-head", "0" * 64)
    assert code == 1 and f"this ledger's head is {out.split('head is ')[1].split(',')[0]}" in out


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("0123456789a", "is too short: give at least the first 12 hex digits"),
        ("0123456789az", "is not a head hash: give its hex digits (0-9, a-f)"),
        ("0" * 65, "is longer than a head hash (64 hex digits)"),
    ],
    ids=["short", "not-hex", "long"],
)
def test_verify_refuses_a_head_it_cannot_compare(busy_ledger: str, given: str, says: str) -> None:
    code, out, err = cli("verify", "--db", busy_ledger, "--expect-head", given)
    assert code == 2 and out == ""
    assert says in " ".join(err.replace("│", " ").split())


def test_verify_catches_a_deleted_last_event_from_the_head_row(busy_ledger: str) -> None:
    tamper(busy_ledger, "DELETE FROM events WHERE seq = 6")
    code, out, _ = cli("verify", "--db", busy_ledger)
    assert code == 1 and "BROKEN at seq 6" in out


# ---------------------------------------------------------------------------- bad input


COMMANDS = [("status",), ("doctor",), ("verify",), ("show", "x"), ("export",), ("migrate",)]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_missing_database_is_refused_and_not_created(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    db = tmp_path / "nowhere" / "ledger.db"
    code, out, err = cli(*command, "--db", str(db))
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "flowledger init" in err
    assert not db.exists() and not db.parent.exists()


def test_a_directory_is_refused(tmp_path: Path) -> None:
    code, _, err = cli("status", "--db", str(tmp_path))
    assert code == 2 and "is a directory" in err and err.count("\n") == 1


@pytest.mark.parametrize("content", [b"hello, not a database\n" * 10, b"SQLite format 3\x00junk"])
def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    db = tmp_path / "notes.db"
    db.write_bytes(content)
    code, _, err = cli("status", "--db", str(db))
    assert code == 2 and err.count("\n") == 1
    assert db.read_bytes() == content
    assert not Path(f"{db}-wal").exists()
    code, _, err = cli("init", "--db", str(db))
    assert code == 2 and db.read_bytes() == content


def test_a_sqlite_file_of_another_program_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    sqlite3.connect(db).execute("CREATE TABLE photos (id INTEGER)").connection.commit()
    code, _, err = cli("status", "--db", str(db))
    assert code == 2 and "holds no ledger" in err
    code, _, err = cli("init", "--db", str(db))
    assert code == 2 and "other tables (photos)" in err


def ledger_with_schema_version(tmp_path: Path, version: int) -> Path:
    db = tmp_path / "ledger.db"
    init_ledger(str(db))[0].dispose()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.commit()
    conn.close()
    return db


# Every process that opens the ledger: the long-running ones (run, serve), the jobs cron runs
# (sweep, sync...), the terminal UI, the diagnosis and the migration itself.
OPENERS = [
    ("run", "--port", "0"),
    ("serve", "--port", "0"),
    ("sweep", "--once"),
    ("sync", "--once"),
    ("alerts", "--once"),
    ("housekeeping", "--once"),
    ("anchor", "--once"),
    ("tui",),
    ("doctor",),
    ("status",),
    ("verify",),
    ("migrate",),
]


@pytest.mark.parametrize(
    ("version", "command"),
    [
        pytest.param(version, command, id=f"{name}-{command[0]}")
        for version, name in ((99, "newer"), (0, "older"))
        for command in OPENERS
        if (version, command) != (0, ("migrate",))  # what migrate is for: tests/integration
    ],
)
def test_every_process_refuses_another_schema_in_the_same_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...], version: int
) -> None:
    settings = tmp_path / "flowledger.toml"  # or sync and anchor have nothing to open it for
    settings.write_text(
        f'[anchors]\nfile = "{tmp_path / "anchors.txt"}"\n\n[[sources]]\nname = "prod-n8n"\n'
        'kind = "n8n"\nbase_url = "http://n8n.test"\napi_key_env = "N8N_API_KEY"\n'
    )
    monkeypatch.setenv("FLOWLEDGER_CONFIG", str(settings))
    db = ledger_with_schema_version(tmp_path, version)
    code, out, err = cli(*command, "--db", str(db))
    said = (
        f"newer than this flowledger knows ({SCHEMA_VERSION}); upgrade flowledger"
        if version > SCHEMA_VERSION
        else f"this flowledger needs {SCHEMA_VERSION}; run `flowledger migrate`"
    )
    assert (code, out) == (2, "")
    assert err == f"flowledger: {db} has schema version {version}, {said}\n"


def test_an_unreachable_postgres_is_one_line(tmp_path: Path) -> None:
    url = "postgresql://postgres:secret-pw@127.0.0.1:1/ledger"
    for command in (("status",), ("init",), ("migrate",)):
        code, out, err = cli(*command, "--db", url)
        assert code == 2 and out == "", (command, out, err)
        assert err.count("\n") == 1 and "secret-pw" not in err, err


def test_an_unsupported_url_is_refused() -> None:
    code, _, err = cli("status", "--db", "mysql://root@localhost/x")
    assert code == 2 and "unsupported database" in err


def test_database_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "env.db"
    monkeypatch.setenv("FLOWLEDGER_DB", str(db))
    assert cli("init")[0] == 0 and db.exists()
    assert cli("status")[0] == 0


@pytest.mark.parametrize("since", ["2000-01-01T00:00:00+02:00", "2000-01-01T00:00:00Z"])
def test_export_since_takes_an_offset(busy_ledger: str, since: str) -> None:
    code, out, _ = cli("export", "--since", since, "--db", busy_ledger)
    assert code == 0 and len(out.splitlines()) == 6


def test_export_since_refuses_a_garbled_time_in_one_line(busy_ledger: str) -> None:
    code, out, err = cli("export", "--since", "yesterday-ish", "--db", busy_ledger)
    assert code == 2 and out == "" and err.count("\n") == 1 and "ISO 8601" in err


def test_migrate_upgrades_a_ledger_made_with_the_first_schema(tmp_path: Path) -> None:
    from alembic import command

    from flowledger.storage.engine import make_store, resolve_url
    from flowledger.storage.migrate import alembic_config

    db = tmp_path / "first.db"
    store = make_store(resolve_url(str(db)), create=True)
    with store.engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
        conn.exec_driver_sql("INSERT INTO sources (name, kind, status) VALUES ('old', 'n8n', 'ok')")
    store.dispose()
    code, _, err = cli("status", "--db", str(db))
    assert code == 2 and "run `flowledger migrate`" in err
    code, _, err = cli("migrate", "--db", str(db))
    assert code == 0, err
    assert cli("status", "--db", str(db))[0] == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name, first_seen_at FROM sources").fetchall() == [("old", None)]
