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
import contextlib
import hashlib
import hmac
import os
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import sqlalchemy as sa

from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger


def bare_sqlite_rate(directory: Path, rows: int) -> float:
    """Rows per second, one INSERT + COMMIT each, durable (WAL + synchronous=FULL)."""
    path = directory / f"bare-{time.monotonic_ns()}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, state TEXT, data TEXT)")
    started = time.perf_counter()
    for i in range(rows):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, 'dispatching', ?)", (f"op-{i}", "x" * 200))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return rows / elapsed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BENCH_SECRET = "bench-server-secret"  # FLOWLEDGER_SECRET of the signed run's receivers
Token = tuple[str, bytes | None]  # the bearer token, and its signing key when it signs


def _request(path: str, body: bytes, token: str, key: bytes | None) -> bytes:
    """One POST as a workflow sends it, signed (v2: HMAC-SHA256 of "t.METHOD.PATH.body") when
    ``key`` is given."""
    signed = ""
    if key is not None:
        stamp = int(time.time())
        digest = hmac.new(key, f"{stamp}.POST.{path}.".encode() + body, hashlib.sha256)
        signed = f"X-Flowledger-Signature: t={stamp},v2={digest.hexdigest()}\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n{signed}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


class _Client(asyncio.Protocol):
    """A kept-alive connection that sends a request and waits for its whole answer. A protocol
    rather than asyncio's streams: the load generator shares the machine's two cores with the
    receivers, and reading each answer line by line through a stream cost it 51 µs of CPU a
    transition against 39-44 µs this way (``client CPU`` below, one run each)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.waiting: asyncio.Future[bytes] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or self.waiting is None:
            return
        length = 0
        for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        answer = bytes(self.buffer[: end + 4 + length])
        del self.buffer[: end + 4 + length]
        waiting, self.waiting = self.waiting, None
        waiting.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(exc or ConnectionError("the receiver closed the connection"))

    async def send(self, request: bytes) -> bytes:
        assert self.transport is not None
        self.waiting = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        answer = await self.waiting
        if not answer.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(repr(answer))
        return answer


async def _client(port: int, token: Token, ops: list[int], latencies: list[float], run: str) -> int:
    loop = asyncio.get_running_loop()
    transport, conn = await loop.create_connection(_Client, "127.0.0.1", port)
    done = 0
    try:
        for i in ops:
            op = f"/v1/operations/{run}-{i}"
            dispatch = (
                f'{{"processing_version":"v1","execution_id":"e-{i}","run_index":0,'
                f'"input":{{"n":{i},"what":"bench"}}}}'
            ).encode()
            t0 = time.perf_counter()
            answer = await conn.send(_request(f"{op}/dispatch", dispatch, *token))
            t1 = time.perf_counter()
            assert b'"decision":"go"' in answer, answer
            confirm = f'{{"receipt":"R-{i}"}}'.encode()
            confirmed = await conn.send(_request(f"{op}/confirm", confirm, *token))
            t2 = time.perf_counter()
            assert b'"state":"confirmed"' in confirmed, confirmed
            latencies.extend((t1 - t0, t2 - t1))
            done += 2
    finally:
        transport.close()
    return done


async def drive(
    ports: list[int], token: Token, pairs: int, clients: int, run: str
) -> tuple[int, float, list[float]]:
    """Client ``c`` talks to ``ports[c % len(ports)]``: several receivers share the load."""
    latencies: list[float] = []
    shares = [list(range(c, pairs, clients)) for c in range(clients)]
    started = time.perf_counter()
    counts = await asyncio.gather(
        *(_client(ports[c % len(ports)], token, s, latencies, run) for c, s in enumerate(shares))
    )
    return sum(counts), time.perf_counter() - started, latencies


@contextlib.contextmanager
def receivers(db: str, count: int, pids: list[int] | None = None) -> Iterator[list[int]]:
    """``count`` ``flowledger serve`` processes on one ledger, each on a free loopback port
    (their process ids appended to ``pids`` when given)."""
    ports = [free_port() for _ in range(count)]
    serve = [sys.executable, "-m", "flowledger.cli", "serve", "--no-access-log", "--db", db]
    env = {**os.environ, "FLOWLEDGER_SECRET": BENCH_SECRET}
    procs = [
        subprocess.Popen(
            [*serve, "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in ports
    ]
    try:
        for port in ports:
            _wait_healthy(port)
        if pids is not None:
            pids.extend(p.pid for p in procs)
        yield ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def _wait_healthy(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """CPU time the processes have used (Linux ``/proc``): unlike the rates, it hardly moves
    with the load others put on the machine. The processes' own, and their children's (the
    writer process of each receiver)."""
    ticks = os.sysconf("SC_CLK_TCK")
    own = children = 0
    for pid in pids:
        own += _cpu_ticks(pid)
        children += sum(_cpu_ticks(child) for child in _descendants(pid))
    return own / ticks, children / ticks


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        for child in children:
            found += [int(child), *_descendants(int(child))]
    return found


def round_trips(ports: list[int]) -> float:
    """The receivers' ``flowledger_db_round_trips_total`` (PostgreSQL), summed."""
    total = 0.0
    for port in ports:
        for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
            if line.startswith("flowledger_db_round_trips_total "):
                total += float(line.split()[1])
    return total


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
        before, cpu = round_trips(ports), cpu_seconds(pids)
        client = time.process_time()
        with sampled(pids[0], profile):
            done, elapsed, latencies = asyncio.run(
                drive(ports, token, pairs, clients, f"run-{name}")
            )
        client = time.process_time() - client
        trips = (round_trips(ports) - before) / done
        after = cpu_seconds(pids)
        own, writer = after[0] - cpu[0], after[1] - cpu[1]
    print(
        f"  receiver CPU    {(own + writer) / done * 1e6:.0f} us per transition (user + system;"
        f" event loop {own / done * 1e6:.0f}, writer process {writer / done * 1e6:.0f})"
    )
    print(f"  client CPU      {client / done * 1e6:.0f} us per transition (this process)")
    _verify(db)
    return done, elapsed, latencies, trips


@contextlib.contextmanager
def sampled(pid: int, output: Path | None) -> Iterator[None]:
    """py-spy samples process ``pid`` (to ``output``) and its writer process (to
    ``writer-output`` beside it) while the block runs (nothing when ``output`` is None), then
    the top of each profile is printed. One py-spy a process: with ``--subprocesses`` it did
    not sample the writer process, which was started before it."""
    if output is None:
        yield
        return
    exe = shutil.which("py-spy", path=Path(sys.executable).parent) or "py-spy"
    targets = [(pid, output)] + [
        (child, output.with_name(f"writer-{output.name}")) for child in _descendants(pid)
    ]
    spies = []
    for target, path in targets:
        command = [exe, "record", "--pid", str(target), "--gil", "--rate", "200"]
        command += ["--format", "raw", "--output", str(path), "--nonblocking"]
        spy = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        spies.append((spy, path))
    try:
        yield
    finally:
        errors = []
        for spy, _ in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on an interrupt
            errors.append(spy.communicate(timeout=60)[1])
    for (_, path), err in zip(spies, errors, strict=True):
        if not path.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.strip()}")
        print_profile(path)


def print_profile(path: Path, top: int = 15) -> None:
    """The functions with most samples in a collapsed-stack file, by their own samples and by
    the samples of the stacks they are in."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = [f.split(" (", 1)[0] + _where(f) for f in stack.split(";")]
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    print(f"  profile of the receiver: {total} samples holding the interpreter lock ({path})")
    for title, counts in (("own time", own), ("with callees", inclusive)):
        print(f"  top by {title}:")
        for frame, n in counts.most_common(top):
            print(f"    {100 * n / total:5.1f}%  {frame}")


def _where(frame: str) -> str:
    """`` (file)`` of a py-spy frame ``name (path:line)``, the path cut to its last parts."""
    _, _, place = frame.partition(" (")
    path = place.rstrip(")").rsplit(":", 1)[0]
    return f" ({'/'.join(path.split('/')[-2:])})" if path else ""


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


def bare_postgres_rate(url: str, rows: int, table: str = "bare") -> float:
    """Rows per second into PostgreSQL, one INSERT + COMMIT each (synchronous_commit on)."""
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE TABLE {table} (id TEXT PRIMARY KEY, state TEXT, data TEXT)"
            )
            conn.commit()
            started = time.perf_counter()
            for i in range(rows):
                conn.exec_driver_sql(
                    f"INSERT INTO {table} VALUES (%s, 'dispatching', %s)", (f"op-{i}", "x" * 200)
                )
                conn.commit()
            return rows / (time.perf_counter() - started)
    finally:
        engine.dispose()


@contextlib.contextmanager
def fresh_postgres(server: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped afterwards."""
    name = f"fl_bench_{uuid.uuid4().hex[:8]}"
    admin_url = sa.make_url(server).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


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
