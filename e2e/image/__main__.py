"""The ledger's image end to end (``make image-test``; minutes, so not part of CI).

    python -m e2e.image

1. builds the image from ``Containerfile`` with podman (or docker; ``IMAGE_ENGINE`` names
   another command line) on ``BASE``: when not given, the official Python image, or when
   that cannot be pulled, a Debian bookworm base made once with debootstrap and kept;
2. runs it on SQLite (a named volume), then on PostgreSQL: the database and role that
   ``deploy/compose/init-databases.sh`` makes, run against the host's server (``PGHOST``,
   127.0.0.1 by default; skipped without one, or when its roles exist there). Each in turn:
   start to healthy, the README's first look through it, its process not root, ``flowledger
   tui`` through ``exec``, ``flowledger backup /data/backups/`` through ``exec`` (on
   PostgreSQL, the image's pg_dump) printing the ledger's head, SIGTERM under load (stopped by
   itself within 10 s), a restart on the same data (nothing acknowledged lost, nothing made or
   migrated again), and on SQLite its log as JSON lines; and a ledger of the first schema (on
   SQLite in a volume; on PostgreSQL in a database beside the ledger's), which the entrypoint
   backs up into ``/data/backups`` before it migrates it;
3. with the local n8n ``make e2e-n8n`` uses (skipped without), gives it the Flowledger node as
   deploy/compose.yaml does, its package.json and dist/ alone in its community packages folder,
   and sees it loaded and found by ``flowledger n8n setup``;
4. prints the image's size and the seconds from start to healthy.

Without podman or docker it prints why and exits 0 (skipped).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from e2e.image import databases
from e2e.image.box import Box
from e2e.image.engine import Engine, Unavailable, base_image, build, find_engine
from e2e.image.node_folder import node_from_its_folder
from e2e.image.scenarios import (
    a_backup_through_exec,
    an_older_ledger_is_backed_up_then_migrated,
    first_look,
    healthy,
    json_logs,
    not_root,
    nothing_acknowledged_lost,
    restart_keeps_the_data,
    sigterm_under_load,
    terminal_ui,
)
from e2e.local_n8n import workdir
from e2e.n8n.checks import Checks
from tests.support.database import first_schema_ledger

IMAGE = "localhost/flowledger:image-test"


def one_database(
    check: Checks, engine: Engine, folder: Path, label: str, env: dict[str, str]
) -> list[float]:
    box = Box(engine, IMAGE, f"flowledger-image-{label}", folder, env=env)
    box.create()
    try:
        first = box.start()
        print(f"      {label}: start to healthy in {first:.1f} s (a new ledger)", flush=True)
        healthy(check, box, label)
        not_root(check, box, label)
        first_look(check, box, label)
        terminal_ui(check, box, label)
        a_backup_through_exec(check, box, label)
        _, load = sigterm_under_load(check, box, label)
        again = restart_keeps_the_data(check, box, label)
        print(f"      {label}: start to healthy in {again:.1f} s (restarted)", flush=True)
        nothing_acknowledged_lost(check, box, label, load)
        if env.get("FLOWLEDGER_LOG_FORMAT") == "json":
            json_logs(check, box, label)
        box.stop()
        return [first, again]
    except Exception:
        print(box.logs()[-3000:])
        raise
    finally:
        box.remove()


def run(check: Checks, engine: Engine, base: str, folder: Path) -> None:
    took = build(engine, base, IMAGE)
    size = engine.size(IMAGE)
    print(f"      built {IMAGE} on {base} in {took:.0f} s: {size / 1e6:.0f} MB", flush=True)
    starts = one_database(check, engine, folder, "sqlite", {"FLOWLEDGER_LOG_FORMAT": "json"})
    upgraded = Box(engine, IMAGE, "flowledger-image-upgrade", folder)
    try:
        an_older_ledger_is_backed_up_then_migrated(
            check, upgraded, "SQLite", first_schema_ledger(folder)
        )
    finally:
        upgraded.remove()
    why = databases.unavailable()
    if why is None:
        with databases.compose_databases(check) as url:
            starts += one_database(check, engine, folder, "postgresql", {"FLOWLEDGER_DB": url})
            with databases.older_ledger(url) as older:
                upgraded = Box(
                    engine,
                    IMAGE,
                    "flowledger-image-pg-upgrade",
                    folder,
                    env={"FLOWLEDGER_DB": older},
                )
                try:
                    an_older_ledger_is_backed_up_then_migrated(check, upgraded, "PostgreSQL")
                finally:
                    upgraded.remove()
    else:
        print(f"      PostgreSQL skipped: {why}")
    node_from_its_folder(check, folder)
    print(
        f"      image {size / 1e6:.0f} MB; start to healthy {min(starts):.1f}-{max(starts):.1f} s",
        flush=True,
    )


def main() -> int:
    # A SIGTERM (from `timeout`) unwinds through the ``finally`` blocks, which remove the
    # containers and their volumes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    try:
        engine = find_engine()
        base = base_image(engine)
    except Unavailable as exc:
        print(f"image-test SKIPPED: {exc}")
        return 0
    check = Checks()
    with workdir("flowledger-image-") as folder, check.ending_early():
        run(check, engine, base, folder)
    return check.summary("image-test", started)


if __name__ == "__main__":
    sys.exit(main())
