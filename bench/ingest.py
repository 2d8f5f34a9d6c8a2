"""Ingest benchmark: durable transitions per second through the webhook receiver.

``python -m bench.ingest [--pairs N] [--clients C]`` creates a fresh SQLite ledger, starts
``flowledger serve`` on a free loopback port, and drives dispatch+confirm pairs (two durable
transitions each) from C concurrent keep-alive clients. In the same run it measures a bare
``sqlite3`` loop that commits one row per transaction (WAL, ``synchronous=FULL``) in the same
directory: the rate one fsync per write allows on this disk. Prints transitions/s, request
latency p50/p99 and the ratio to the bare loop; a ratio above 1 means group commit beats one
fsync per row even with HTTP, validation, the state machine and the event chain on top.

``--profile FILE`` samples the SQLite receiver with py-spy (a dev dependency) during the timed
run, only while a thread holds the interpreter lock (``--gil``: where its CPU goes), writes the
collapsed stacks to FILE (the signed run's to ``signed-FILE`` beside it, the first PostgreSQL
receiver's to ``pg-FILE``) and prints the functions that took most samples, by their own time
and with what they call.

``--only postgres`` skips the SQLite rounds, ``--only sqlite`` the PostgreSQL ones.

The same run is repeated with a signing token (each request HMAC-signed, v2, and each
signature remembered once): the signed rate is printed beside the plain one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.baselines import bare_postgres_rate, bare_sqlite_rate, fresh_postgres
from bench.load import drive
from bench.receivers import BENCH_SECRET, counters, cpu_seconds, receivers
from bench.sampling import sampled
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger


def measure(
    db: str,
    processes: int,
    pairs: int,
    clients: int,
    profile: Path | None = None,
    *,
    signing: bool = False,
) -> tuple[int, float, list[float], float]:
    """A fresh token on the ledger at ``db`` (one that signs its requests if ``signing``), a
    warm-up, then the timed run; also the round trips to the database per transition in the
    timed run (0 on SQLite). With ``profile``, the first receiver is sampled during the timed
    run (see :func:`sampled`)."""
    store, _ = init_ledger(db)
    name = "bench-signed" if signing else "bench"
    made = create_token(
        Ledger(store), name, "write", signing=signing, server_secret=BENCH_SECRET.encode()
    )
    store.dispose()
    key = bytes.fromhex(made.signing_secret) if made.signing_secret else None
    token = (made.token, key)
    pids: list[int] = []
    with receivers(db, processes, pids) as ports:
        asyncio.run(drive(ports, token, 200, clients, f"warm-{name}"))
        before, cpu = counters(ports), cpu_seconds(pids)
        client = time.process_time()
        with sampled(pids[0], profile):
            done, elapsed, latencies = asyncio.run(
                drive(ports, token, pairs, clients, f"run-{name}")
            )
        client = time.process_time() - client
        counted = {k: v - before[k] for k, v in counters(ports).items()}
        trips = counted["flowledger_db_round_trips_total"] / done
        after = cpu_seconds(pids)
        own, writer = after[0] - cpu[0], after[1] - cpu[1]
    print(
        f"  receiver CPU    {(own + writer) / done * 1e6:.0f} us per transition (user + system;"
        f" event loop {own / done * 1e6:.0f}, writer process {writer / done * 1e6:.0f})"
    )
    print(f"  client CPU      {client / done * 1e6:.0f} us per transition (this process)")
    commits = counted["flowledger_commit_batch_units_count"]
    if commits:
        units = counted["flowledger_commit_batch_units_sum"] / commits
        print(f"  group commit    {units:.1f} units per commit ({commits:.0f} commits)")
    _verify(db)
    return done, elapsed, latencies, trips


def _verify(db: str) -> None:
    """``flowledger verify`` after every run: the chain must hold end to end."""
    subprocess.run(
        [sys.executable, "-m", "flowledger.cli", "verify", "--db", db],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def report(label: str, done: int, elapsed: float, latencies: list[float], pairs: int) -> float:
    rate = done / elapsed
    q = statistics.quantiles(latencies, n=100)
    print(f"{label}: {done} durable transitions ({pairs} pairs) in {elapsed:.2f} s")
    print(f"  throughput      {rate:,.0f} transitions/s")
    print(f"  latency p50     {q[49] * 1000:.1f} ms")
    print(f"  latency p99     {q[98] * 1000:.1f} ms")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="dispatch+confirm pairs")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--bare-rows", type=int, default=1500)
    parser.add_argument("--dir", default="./var", help="where the ledgers are made (same disk)")
    parser.add_argument(
        "--profile", type=Path, help="sample the receivers with py-spy into this file (and pg-…)"
    )
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="run one database's rounds")
    args = parser.parse_args()
    if args.only != "postgres":
        sqlite_rounds(args)
    if args.only != "sqlite":
        postgres_rounds(args)


def sqlite_rounds(args: argparse.Namespace) -> None:
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-ingest-") as tmp:
        directory = Path(tmp)
        bare_before = bare_sqlite_rate(directory, args.bare_rows)
        done, elapsed, latencies, _ = measure(
            str(directory / "ledger.db"), 1, args.pairs, args.clients, args.profile
        )
        signed_profile = args.profile and args.profile.with_name(f"signed-{args.profile.name}")
        signed_done, signed_elapsed, signed_latencies, _ = measure(
            str(directory / "signed.db"),
            1,
            args.pairs,
            args.clients,
            signed_profile,
            signing=True,
        )
        signed_run = (signed_done, signed_elapsed, signed_latencies)
        # The disk is shared: measure the baseline before and after, and use the mean.
        bare = (bare_before + bare_sqlite_rate(directory, args.bare_rows)) / 2

    label = f"receiver on SQLite, {args.clients} clients"
    rate = report(label, done, elapsed, latencies, args.pairs)
    signed = report(f"{label}, every request signed (v2)", *signed_run, args.pairs)
    print(f"  signed / plain  {signed / rate:.2f}")
    print(
        f"bare sqlite3, one commit per row (WAL, synchronous=FULL): {bare:,.0f} rows/s "
        f"(mean of before {bare_before:,.0f} and after): a durable commit costs "
        f"{1000 / bare:.2f} ms on this disk"
    )
    print(f"ratio receiver / bare loop: {rate / bare:.2f}")
    print(f"cpus: {os.cpu_count()}  (goal: >= 2,000/s, p99 <= 50 ms on 2 cores, ratio >= 1.0)")


def postgres_rounds(args: argparse.Namespace) -> None:
    server = os.environ.get("FLOWLEDGER_BENCH_PG_URL") or os.environ.get("FLOWLEDGER_TEST_PG_URL")
    if not server:
        print("\nPostgreSQL: set FLOWLEDGER_BENCH_PG_URL to measure the scale-out path too")
        return
    print()
    profile = args.profile and args.profile.with_name(f"pg-{args.profile.name}")
    for processes in (1, 2):
        # The loop before and after the receivers, as on SQLite (one run of it moved by a
        # fifth between rounds on this machine), in a database of its own: the ledger's
        # must hold nothing else.
        with fresh_postgres(server) as bare_url:
            before = bare_postgres_rate(bare_url, args.bare_rows, "bare_before")
            with fresh_postgres(server) as url:
                done, elapsed, latencies, trips = measure(
                    url, processes, args.pairs, args.clients, profile if processes == 1 else None
                )
            after = bare_postgres_rate(bare_url, args.bare_rows, "bare_after")
        bare = (before + after) / 2
        label = f"receiver on PostgreSQL, {processes} serve process(es), {args.clients} clients"
        rate = report(label, done, elapsed, latencies, args.pairs)
        print(f"  round trips     {trips:.2f} per transition (statements, syncs, commits)")
        print(
            f"  bare psycopg loop, one commit per row: {bare:,.0f} rows/s "
            f"(mean of before {before:,.0f} and after {after:,.0f})"
        )
        print(f"  ratio receiver / bare loop: {rate / bare:.2f}")


if __name__ == "__main__":
    main()
