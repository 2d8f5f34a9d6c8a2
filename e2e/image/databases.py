"""deploy/compose/init-databases.sh run against the host's PostgreSQL as the postgres image
runs it on its first start (``psql`` as the superuser, the passwords in the environment): the
ledger's container then runs on the database it made, as the role it made. The compose file's
own postgres service needs an image that may not be pullable; its script is what it adds."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from e2e.local_n8n import ROOT
from e2e.n8n.checks import Checks
from tests.support.database import first_schema

SCRIPT = ROOT / "deploy" / "compose" / "init-databases.sh"
ROLES = ("n8n", "flowledger")  # each with a database of its name
OLDER = "flowledger_older"  # the ledger's role's, for an older ledger to migrate
PASSWORDS = {"N8N_DB_PASSWORD": "n8n2image", "LEDGER_DB_PASSWORD": "ledger2image"}


def psql(
    sql: str, user: str = "postgres", database: str = "postgres"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", "--no-psqlrc", "-X", "-At", "--username", user, "--dbname", database, "-c", sql],
        capture_output=True,
        text=True,
        env=_env(),
    )


def _env() -> dict[str, str]:
    return {"PGHOST": "127.0.0.1", "PGPORT": "5432", **os.environ, **PASSWORDS}


def unavailable() -> str | None:
    """Why the script cannot be run here, or None."""
    if shutil.which("psql") is None:
        return "no psql"
    if psql("select 1").returncode != 0:
        return "no PostgreSQL at PGHOST (127.0.0.1:5432) for the postgres user"
    taken = psql(
        "select rolname from pg_roles where rolname in ('n8n', 'flowledger') union "
        "select datname from pg_database where datname in ('n8n', 'flowledger', 'flowledger_older')"
    ).stdout.split()
    if taken:
        return f"{', '.join(sorted(set(taken)))} exist on that server already (not ours to drop)"
    return None


@contextmanager
def compose_databases(check: Checks) -> Iterator[str]:
    """Run the script; yield the ledger's database URL as compose.yaml builds it (the host's
    server in place of the ``postgres`` service); drop what it made afterwards."""
    done = subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, env=_env())
    try:
        check("compose: init-databases.sh runs", done.returncode == 0, done.stderr.strip())
        owners = psql(
            "select datname || '=' || pg_get_userbyid(datdba) from pg_database "
            "where datname in ('n8n', 'flowledger') order by 1"
        ).stdout.split()
        check(
            "compose: a database each for n8n and the ledger, each owned by its role",
            owners == ["flowledger=flowledger", "n8n=n8n"],
            " ".join(owners),
        )
        crossed = [
            f"{user} -> {database}"
            for user, database in (("n8n", "flowledger"), ("flowledger", "n8n"))
            if psql("select 1", user, database).returncode == 0
        ]
        check(
            "compose: neither role may connect to the other's database", not crossed, str(crossed)
        )
        password = PASSWORDS["LEDGER_DB_PASSWORD"]
        yield f"postgresql://flowledger:{password}@127.0.0.1:5432/flowledger"
    finally:
        for role in ROLES:
            psql(f'DROP DATABASE IF EXISTS "{role}" WITH (FORCE)')
            psql(f'DROP ROLE IF EXISTS "{role}"')


@contextmanager
def older_ledger(url: str) -> Iterator[str]:
    """A database beside ``url``'s, owned by its role, holding a ledger of the first schema
    (made as that role); yields its URL, drops it afterwards."""
    older = sa.make_url(url).set(database=OLDER)
    done = psql(f'CREATE DATABASE "{OLDER}" OWNER "{older.username}"')
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    try:
        first_schema(older.render_as_string(hide_password=False))
        yield older.render_as_string(hide_password=False)
    finally:
        psql(f'DROP DATABASE IF EXISTS "{OLDER}" WITH (FORCE)')
