"""Creating, migrating and diagnosing a ledger database: ``init``, ``migrate``, ``doctor``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowledger.cli.common import (
    BAD_INPUT,
    FAILED,
    DbOption,
    app,
    die,
    handles_broken_settings,
    one_line_errors,
    opened,
)
from flowledger.cli.tables import echo_table
from flowledger.domain.display import counted
from flowledger.domain.hashing import GENESIS_HASH
from flowledger.storage.problems import LedgerError

if TYPE_CHECKING:
    from flowledger.storage.engine import Store

SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


@app.command()
@one_line_errors
def init(db: DbOption = None) -> None:
    """Create a ledger (the only command that creates a database)."""
    from flowledger.storage import migrate as migrations
    from flowledger.storage.engine import hide_password
    from flowledger.storage.models import SCHEMA_VERSION

    store, created = migrations.init_ledger(db)
    where = hide_password(store.url)
    store.dispose()
    if created:
        typer.echo(f"created ledger at {where} (schema version {SCHEMA_VERSION})")
    else:
        typer.echo(f"ledger at {where} already exists; nothing to do")


@app.command()
@one_line_errors
def migrate(
    db: DbOption = None,
    backup_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="First write a checked backup into DIR (created owner-only when missing), "
            "named for the time it is taken; only when there is something to migrate",
        ),
    ] = None,
) -> None:
    """Upgrade an existing ledger's schema to the version this flowledger knows."""
    from flowledger.cli.backups import take_backup
    from flowledger.storage import migrate as migrations
    from flowledger.storage.engine import (
        first_line,
        hide_password,
        make_store,
        read_schema_version,
        resolve_url,
        schema_problem,
    )
    from flowledger.storage.errors import DatabaseError
    from flowledger.storage.models import SCHEMA_VERSION

    url = resolve_url(db)
    store = make_store(url)
    try:
        try:
            before = read_schema_version(store.engine)
        except DatabaseError as exc:
            raise LedgerError(f"cannot open {hide_password(url)}: {first_line(exc)}") from exc
        if before is None:
            die(f"{hide_password(url)} holds no ledger; run `flowledger init` to create one")
        assert before is not None
        if before > SCHEMA_VERSION:
            die(str(schema_problem(url, before)))
        if (
            backup_dir is not None
            and migrations.current_revision(store) != migrations.head_revision()
        ):
            written, _ = take_backup(store, _private_dir(backup_dir))
            typer.echo(f"backed up schema version {before} to {written}")
        migrations.upgrade(store)
        after = read_schema_version(store.engine)
    finally:
        store.dispose()
    if before == after:
        typer.echo(f"schema version {after} is current; nothing to do")
    else:
        typer.echo(f"migrated schema version {before} -> {after}")


def _private_dir(path: Path) -> Path:
    """``path``, made owner-only (0700) with its missing parents when it is not there."""
    from flowledger.storage.engine import PRIVATE_DIR

    if not path.is_dir():
        try:
            path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create {path}: {exc.strerror}") from None
    return path


@app.command()
@one_line_errors
@handles_broken_settings
def doctor(db: DbOption = None) -> None:
    """Report the database, the settings file read and its verdict, whether FLOWLEDGER_SECRET
    is set, the SQLite build and its known bugs, the schema and the witnesses. A settings file
    every other command refuses exits 2, a witness's refusal nobody has cleared 1, after the
    report."""
    from flowledger.cli.common import settings as environment
    from flowledger.storage.reads.records import newest_input_hash

    settings, valid = settings_finding()
    secret_set = environment().secret is not None
    with opened(db) as store:
        found = _diagnosis(store)
        secret = secret_finding(secret_set, newest_input_hash(store))
    echo_table([found[0], ("settings:", settings), ("secret:", secret), *found[1:]])
    if not valid:
        raise typer.Exit(BAD_INPUT)
    if any(label == "witnesses:" and value.startswith("WITNESS ALARM") for label, value in found):
        raise typer.Exit(FAILED)


def settings_finding() -> tuple[str, bool]:
    """``doctor``'s line for ``flowledger.toml``: the file read and its verdict, or that there
    is none and the defaults apply; and whether the commands take it. A broken file is said
    in the line every other command refuses it with."""
    from pathlib import Path

    from flowledger.config import CONFIG_FILE, config_path, load_config

    try:
        path = config_path()
        if path is None:
            return f"none (no {Path.cwd() / CONFIG_FILE}, no FLOWLEDGER_CONFIG): the defaults", True
        file = load_config(path)
    except LedgerError as exc:
        return f"ERROR: {exc} (every other command but tui refuses it)", False
    return f"{path}: valid ({counted(len(file.sources), 'source')})", True


def autovacuum_finding(
    setting: object, track_counts: object = "on", off_for: Sequence[str] = ()
) -> str:
    """``doctor``'s line for PostgreSQL's autovacuum: the ``autovacuum`` setting, the
    ``track_counts`` it needs to see a table change, and the ledger's tables that turn it off
    for themselves (``autovacuum_enabled = false``)."""
    if setting != "on":
        why = f"{setting}"
    elif track_counts != "on":
        why = "on, but track_counts is off, so it never sees a table change"
    elif off_for:
        why = f"on, but turned off for {', '.join(off_for)}"
    else:
        return "on"
    return (
        f"WARNING: {why}: nothing analyzes the tables as they grow, so PostgreSQL plans "
        "their reads from stale estimates (a sync analyzes the copies it backfills itself); "
        "turn autovacuum on, or run ANALYZE from cron"
    )


def wal_reset_finding(affected: bool) -> str:
    """``doctor``'s line for SQLite's WAL-reset bug: on a build that has it, what the ledger
    does so that the bug cannot strike (``storage/engine.py``, ``storage/unit_of_work.py``)."""
    if not affected:
        return "not affected"
    from flowledger.storage.engine import CHECKPOINT_EVERY

    return (
        "affected (3.7.0-3.51.2 but 3.44.6, 3.50.7) and mitigated: "
        "no connection checkpoints on its own (wal_autocheckpoint = 0); the ledger checkpoints "
        "(wal_checkpoint(PASSIVE)) while it holds the writer lock, so that no commit can race "
        f"it, every {CHECKPOINT_EVERY} commits of a process and when a process closes the ledger"
    )


def secret_finding(secret_set: bool, newest_hash: str | None) -> str:
    """``doctor``'s line for ``FLOWLEDGER_SECRET``: whether it is set (never its value), and a
    warning when the newest operation's input hash was made the other way, keyed or not: the
    next dispatch of each operation hashed that way is an ``input_mismatch``. A secret
    changed for another one cannot be seen here (both hash to ``hmac-sha256:``)."""
    if secret_set:
        said, other, fix = "set (input hashes are HMAC-SHA-256)", "sha256:", "unset"
    else:
        said = "not set (input hashes are plain SHA-256; set it before the first write or never)"
        other, fix = "hmac-sha256:", "set"
    if newest_hash is None or not newest_hash.startswith(other):
        return said
    made = "without" if secret_set else "with"
    return (
        f"WARNING: {said.split(' (')[0]}, but the newest operation's input hash is {other} "
        f"(made {made} a secret): the next dispatch of each operation recorded so is held "
        f"input_mismatch; {fix} FLOWLEDGER_SECRET as it was when they were recorded "
        "(docs/production.md#settings)"
    )


def _identity(store: Store) -> str:
    """The ledger's id, and where its chain starts from when that is the shared genesis."""
    from flowledger.storage.reads import chain

    ledger_id, genesis = chain.identity_of(store)
    if genesis == GENESIS_HASH:
        return f"{ledger_id} (its chain starts from the all-zeros genesis it had before ids)"
    return ledger_id


def _restored(store: Store) -> str:
    """``doctor``'s line for a ledger put back from a backup: the warning until that is
    acknowledged, and then who acknowledged which restore, when."""
    from flowledger.domain.times import for_people
    from flowledger.services.restores import warning
    from flowledger.storage.reads import records

    taken = records.restored_from(store)
    if taken is not None:
        return warning(taken)
    done = records.restore_acknowledged(store)
    if done is None:
        return "no"
    who = done.by.removeprefix("operator:")
    return (
        f"no (restored from a backup taken at {for_people(done.backup_taken_at)}, "
        f"acknowledged by {who} at {for_people(done.at)})"
    )


def _acting(store: Store) -> str:
    """``doctor``'s line for what waits to be done in n8n (:func:`waiting_finding`)."""
    from flowledger.cli.pins import waiting_finding
    from flowledger.plumbing.clock import utcnow
    from flowledger.storage import acting

    with store.reader.connect() as conn:
        found = acting.waiting(conn)
    return waiting_finding(found, utcnow())


def _witnesses(store: Store) -> str:
    """``doctor``'s line for the witnesses: each refusal nobody has cleared (an alarm), else
    the size each last cosigned and its last error."""
    from flowledger.services.witnessing import alarm, name_of
    from flowledger.storage.reads import witnesses

    with store.reader.connect() as conn:
        known = list(witnesses.states(conn).values())
    alarms = [alarm(w) for w in known if w.refused_at is not None]
    if alarms:
        return " | ".join(alarms)
    if not known:
        return "none has cosigned a checkpoint of this ledger"
    return "; ".join(
        (
            f"{name_of(w.witness)} cosigned up to {w.seen_size}"
            if w.seen_size
            else f"{name_of(w.witness)} has cosigned no checkpoint yet"
        )
        + (f" (last error: {w.last_error})" if w.last_error else "")
        for w in known
    )


def _diagnosis(store: Store) -> list[tuple[str, str]]:
    """``doctor``'s findings, one (label, value) a line."""
    from flowledger.storage import migrate as migrations
    from flowledger.storage.engine import (
        WAL_RESET_AFFECTED,
        hide_password,
        shared_files,
        sqlite_path,
    )
    from flowledger.storage.models import SCHEMA_VERSION
    from flowledger.storage.reads import database as settings

    found = [
        ("database:", hide_password(store.url)),
        ("ledger:", _identity(store)),
        ("schema version:", f"{SCHEMA_VERSION} (current)"),
        ("restored:", _restored(store)),
        ("witnesses:", _witnesses(store)),
        ("pins, retries:", _acting(store)),
        (
            "alembic:",
            f"{migrations.current_revision(store)} (head {migrations.head_revision()})",
        ),
    ]
    if sqlite_path(store.url) is None:
        pg = settings.postgres_settings(store)
        return [
            *found,
            ("postgresql:", str(pg.version)),
            (
                "autovacuum:",
                autovacuum_finding(pg.autovacuum, pg.track_counts, pg.autovacuum_off_for),
            ),
        ]
    pragmas = settings.sqlite_pragmas(store)
    found.append(("sqlite build:", settings.SQLITE_VERSION))
    found.append(("wal-reset bug:", wal_reset_finding(WAL_RESET_AFFECTED)))
    path = sqlite_path(store.url)
    assert path is not None
    shared = shared_files(path)
    if shared:
        found.append(
            (
                "file modes:",
                f"WARNING: readable by others: {', '.join(shared)}; the ledger holds receipts "
                "and errors: chmod 600 them",
            )
        )
    else:
        found.append(("file modes:", "owner only"))
    return [
        *found,
        ("journal mode:", pragmas.journal_mode),
        ("synchronous:", SYNCHRONOUS.get(pragmas.synchronous, pragmas.synchronous)),
        ("busy timeout:", f"{pragmas.busy_timeout} ms"),
        ("foreign keys:", "on" if pragmas.foreign_keys else "off"),
    ]
