"""One client's slow sockets against another client's calls (issue 39, finding F3).

``python -m bench.slow_clients [--sockets 1100] [--calls 200]`` starts ``flowledger serve``
with its default settings (``max_connections`` 1000, ``max_connections_per_client`` 100) on
a fresh SQLite ledger, opens ``--sockets`` connections from 127.0.0.2, each sending the start
of a request head and then nothing, and while they are open makes ``--calls`` dispatch calls
from 127.0.0.3, one after another. It prints what the slow sockets were answered (``429``
for those refused), what the other client's calls were answered and how long they took, and
then ends the heads of the slow sockets still open, to show they were held, not dropped.

All of 127.0.0.0/8 is loopback on Linux; 127.0.0.1 is left to the trusted proxy (the
default ``trusted_proxies``), whose own connections are not counted per address.
"""

from __future__ import annotations

import argparse
import resource
import selectors
import socket
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

from bench.load import pair
from bench.receivers import receivers
from flowledger.receiver.api.tokens import create_token
from flowledger.services.ledger import Ledger
from flowledger.storage.migrate import init_ledger

SLOW, OTHER = "127.0.0.2", "127.0.0.3"
HEAD = b"GET /healthz HTTP/1.1\r\nHost: bench\r\n"  # never ended until the last step
WAIT = 30.0  # seconds, at most, for an answer that is coming


def room_for(sockets: int) -> None:
    """Open files enough for ``sockets`` and the rest (the soft limit raised to the hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < sockets + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if min(soft, hard) < sockets + 256 and hard < sockets + 256:
        raise SystemExit(f"ulimit -n is {hard}: {sockets} sockets need more")


def status_of(sock: socket.socket) -> str:
    """The status of the answer on ``sock``, or what happened instead."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return "closed without an answer"
            data += chunk
    except OSError as exc:
        return type(exc).__name__
    return data.split(b" ", 2)[1].decode()


def answered(socks: list[socket.socket], wait: float) -> Counter[str]:
    """What each of ``socks`` that the server answers (or closes) within ``wait`` seconds of
    the last one was answered; those left are the ones it holds."""
    seen: Counter[str] = Counter()
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while ready := selector.select(wait):
            for key, _ in ready:
                assert isinstance(key.fileobj, socket.socket)
                sock = key.fileobj
                selector.unregister(sock)
                socks.remove(sock)
                seen[status_of(sock)] += 1
                sock.close()
    return seen


def run(sockets: int, calls: int) -> None:
    room_for(sockets)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "ledger.db")
        store, _ = init_ledger(db)
        token = create_token(
            Ledger(store), "bench", "write", signing=False, server_secret=None
        ).token
        store.dispose()
        with receivers(db, 1) as (port,):
            slow: list[socket.socket] = []
            try:
                for _ in range(sockets):
                    sock = socket.create_connection(
                        ("127.0.0.1", port), timeout=WAIT, source_address=(SLOW, 0)
                    )
                    sock.sendall(HEAD)
                    slow.append(sock)
                print(f"{sockets} slow sockets opened from {SLOW}, each a head never ended")
                statuses: Counter[int] = Counter()
                took: list[float] = []
                transport = httpx.HTTPTransport(local_address=OTHER)
                with httpx.Client(transport=transport, timeout=WAIT) as client:
                    for i in range(calls):
                        body, _ = pair(i)
                        started = time.perf_counter()
                        answer = client.post(
                            f"http://127.0.0.1:{port}/v1/operations/op-{i}/dispatch",
                            content=body,
                            headers={
                                "Authorization": f"Bearer {token}",
                                "Content-Type": "application/json",
                            },
                        )
                        took.append(time.perf_counter() - started)
                        statuses[answer.status_code] += 1
                shown = ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
                print(f"{calls} dispatch calls from {OTHER} meanwhile: {shown}")
                print(
                    f"  each took p50 {statistics.median(took) * 1000:.1f} ms, "
                    f"max {max(took) * 1000:.1f} ms"
                )
                refused = answered(slow, 2.0)
                shown = ", ".join(f"{n} x {s}" for s, n in sorted(refused.items())) or "none"
                print(f"the slow sockets answered: {shown}; held open: {len(slow)}")
                for sock in slow:
                    sock.sendall(b"\r\n")
                ended = Counter(status_of(sock) for sock in slow)
                shown = ", ".join(f"{n} x {s}" for s, n in sorted(ended.items())) or "none"
                print(f"the held ones, their heads ended: {shown}")
            finally:
                for sock in slow:
                    sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=1100, help="slow sockets from one address")
    parser.add_argument("--calls", type=int, default=200, help="calls from another address")
    args = parser.parse_args()
    run(args.sockets, args.calls)


if __name__ == "__main__":
    main()
